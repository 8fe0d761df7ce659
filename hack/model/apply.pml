/*
 * apply.pml: the per-row apply of an approved RetirementPlan, as
 * controllers/retirementplan/apply.go implements it with the decisions of
 * internal/retirement, extended with the single-applier progress record (steps A3, A5,
 * A8, T1-T3: applyProgress in the plan status) and the takeover that resumes an apply
 * (R1-R2, then the row steps A5-A8 and the report A9). docs/protocols.md explains the
 * steps, the scope and the assumptions; the step names appear as "model:" comments in the
 * Go code.
 *
 * Scope: NR registrations (rows), approved as the candidate set of one plan; two
 * appliers (manager instances, or one instance before and after a restart), each of which
 * may crash once at any step and come back as a new applier; NEV concurrent worker events
 * at any step: a row's process runs again (revive), a live worker heartbeats, or a worker
 * creates a TaskClaim and later moves the workflow fence acquiring it.
 *
 * Switches (each must make SPIN find a counterexample; hack/model/run.sh checks it):
 *   MUTANT_NO_REPROBE      no liveness re-probe right before a row's write
 *   MUTANT_NO_INTENT_CAS   no applyProgress: every applier that sees an approved plan applies
 *   MUTANT_FENCE_AFTER_READ the workflow fence is read after the authoritative read
 *   MUTANT_TAKEOVER_EARLY  the takeover timeout may elapse while the holder can still write
 *                          rows (what the timeout must rule out)
 *   MUTANT_LOST_NO_CAS     the stand-in for a lost host's agent closes the plan without the
 *                          resourceVersion guard
 *   MUTANT_RESUME_NO_REVALIDATE a takeover resumes the apply without revalidating the
 *                          remaining rows: no check of the resourceVersion the intent
 *                          recorded, of liveness or of claims, and no re-probe
 *   MUTANT_RESUME_NO_VERSION a takeover resumes the apply revalidating everything but
 *                          what the intent recorded of each row (its writes carry the
 *                          resourceVersion it read itself)
 */

#define NR 3
#define NA 2
#ifndef NEV
#define NEV 2
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXTAKE
#define MAXTAKE 2
#endif
#ifndef RENEW_EVERY
#define RENEW_EVERY 2
#endif

/* ---- registrations (WorkerRegistration) ---- */
bool retired[NR];     /* status.phase Retired, status.retiredBy this plan (nothing else retires here) */
bool rmoved[NA*NR];   /* row r's resourceVersion moved since applier a's authoritative read: [a*NR+r] */
bool imoved[NR];      /* row r changed since the intent recorded it (its fingerprint; every
                         resourceVersion move here is a change) */
bool alive[NR];       /* the registered process runs */
bool claimobj[NR];    /* the worker has a TaskClaim that is not final (a workflow owner) */
bool bumped[NR];      /* ... and that claim moved the workflow fence (it is acquiring) */
bool fmoved[NA];      /* the workflow fence moved since applier a read it */
byte events;          /* worker events so far */
bool pw[NA*NR];       /* applier a between row r's re-probe and its write: [a*NR+r] (assumption A-L) */

/* ---- the plan status ---- */
#define S_NONE 0
#define S_INPROG 1
#define S_FINISHED 2
byte pstate;          /* applyProgress.state, or Finished once the report is written */
byte pholder;         /* applyProgress.applier: incarnation id, 0 = none */
bool pstale;          /* renewedAt is older than the takeover timeout */
bool intended[NR];    /* applyProgress.intendedRows */
bool rep[NR];         /* the report's retired rows */
bool pmoved[NA+1];    /* the plan's resourceVersion moved since applier a read it (NA: the stand-in) */

/* ---- appliers ---- */
byte crashes;
byte takes;           /* takeovers so far (T1) */
byte inc[NA];         /* current incarnation of applier a: its id is a*2+inc+1 */
bool dead[NA*2];      /* incarnation id-1 has crashed */
bool inwin[NA];       /* applier a may write a row before its next renewal (assumption A-T) */

#define PLAN_MOVED pmoved[0] = true; pmoved[1] = true; pmoved[NA] = true
#define ROW_MOVED(r) rmoved[r] = true; rmoved[NR+r] = true; imoved[r] = true

/* P5 the report never claims a row that was not retired (P5a) and never omits one that
 * was (P5b), from the moment it is written on. */
#define REPORT_OK(r) (pstate != S_FINISHED || rep[r] == retired[r])
ltl report { [] (REPORT_OK(0) && REPORT_OK(1) && REPORT_OK(2)) }

/* A crash of the applier may cut any step short (before it lands): the first option of
 * every step. */
#define ABORT :: crashes < MAXCRASH -> goto crash

proctype Applier(byte a) {
	byte id;
	byte r;
	byte n;               /* rows since the last renewal */
	bool cand[NR];
	bool done[NR];        /* the rows this applier retired (its report) */
	bool ok;
	bool ob;              /* the row's worker had moved the fence before this row's check */
#ifdef MUTANT_RESUME_NO_REVALIDATE
	bool resumed;         /* this applier resumes an apply it took over (R1-R2) */
#endif
start:
	id = a*2 + inc[a] + 1;
top:
	atomic {
		r = 0; n = 0; ok = false; ob = false;
#ifdef MUTANT_RESUME_NO_REVALIDATE
		resumed = false;
#endif
		cand[0] = false; cand[1] = false; cand[2] = false;
		done[0] = false; done[1] = false; done[2] = false;
		inwin[a] = false;
		/* A0: read the plan (Reconcile) */
		pmoved[a] = false;
		if
		:: pstate == S_FINISHED -> goto out           /* applied once */
		:: pstate == S_INPROG && pholder != id && !pstale -> goto top   /* another applier holds it: do nothing now */
		:: pstate == S_INPROG && pstale -> goto takeover
		:: pstate == S_NONE -> skip
		fi
	}
#ifndef MUTANT_FENCE_AFTER_READ
	/* A1: read the workflow fence (workflowfence.Fence.Read), before the authoritative read */
	atomic { if ABORT :: true -> fmoved[a] = false fi }
#endif
	/* A2: the authoritative read of the rows and the task claims, a liveness probe of each,
	 * retirement.BuildPlan afresh and retirement.DecideApply against the approval (all
	 * NR rows, candidate-bound): a row that is no candidate any more stops the apply. */
	atomic {
		if
		ABORT
		:: true ->
			for (r : 0 .. NR-1) {
				rmoved[a*NR+r] = false;
				/* a row whose worker holds a claim is no candidate (protected_active_workflow_owner) */
				cand[r] = (!retired[r] && !alive[r] && !claimobj[r])
			}
			r = 0;
			ok = cand[0] && cand[1] && cand[2]
		fi
	}
#ifdef MUTANT_FENCE_AFTER_READ
	atomic { if ABORT :: true -> fmoved[a] = false fi }
#endif
	if
	:: !ok -> goto stopreport       /* candidate_set_moved / already_retired: nothing written */
	:: else -> skip
	fi;
	/* (stillApproved: the approver check, not modelled) */
#ifndef MUTANT_NO_INTENT_CAS
	/* A3: the intent, a status write guarded by the plan's resourceVersion:
	 * applyProgress {InProgress, this applier, startedAt, renewedAt, intended rows, each
	 * with the resourceVersion of the authoritative read}. Only the winner writes rows. */
	atomic {
		if
		ABORT
		:: pmoved[a] -> goto top       /* lost: re-read, and do nothing while it is fresh */
		:: else ->
			pstate = S_INPROG; pholder = id; pstale = false;
			intended[0] = cand[0]; intended[1] = cand[1]; intended[2] = cand[2];
			imoved[0] = rmoved[a*NR]; imoved[1] = rmoved[a*NR+1]; imoved[2] = rmoved[a*NR+2];
			PLAN_MOVED; inwin[a] = true
		fi
	}
#endif
	r = 0;
rows:
	do
	:: r == NR -> break
	:: r < NR ->
		if
		:: !cand[r] -> goto nextrow   /* a resumed apply writes only the rows DecideResume kept */
		:: else -> skip
		fi;
#ifndef MUTANT_NO_INTENT_CAS
		if
		:: n == RENEW_EVERY ->
			/* A5: renewal, every RENEW_EVERY rows, guarded by the plan's resourceVersion;
			 * losing it stops this applier at once: no more rows, no report. */
			inwin[a] = false;
			atomic {
				if
				ABORT
				:: pmoved[a] -> goto top
				:: else -> pstale = false; PLAN_MOVED; inwin[a] = true; n = 0
				fi
			}
		:: else -> skip
		fi;
#endif
		/* A6: the workflow fence (Fence.Moved): moved means a claim was acquired, and the
		 * remaining rows are left untouched (external_fence_moved). A7: the liveness
		 * re-probe and retirement.RecheckBeforeWrite (two reads: one step). */
		atomic {
			if
			ABORT
			:: fmoved[a] -> goto report
			:: else -> ob = bumped[r]
			fi;
			pw[a*NR+r] = true;
#ifndef MUTANT_NO_REPROBE
			if
#ifndef MUTANT_RESUME_NO_REVALIDATE
			:: alive[r] -> pw[a*NR+r] = false; goto nextrow      /* pid_alive: preserved */
#else
			:: alive[r] && !resumed -> pw[a*NR+r] = false; goto nextrow
#endif
			:: else -> skip
			fi
#endif
		}
		/* A8: the guarded write: Retired, retiredBy this plan, carrying the resourceVersion
		 * of the authoritative read (a conflict preserves row_changed_since_plan). */
		atomic {
			if
			ABORT
			:: rmoved[a*NR+r] -> pw[a*NR+r] = false
			:: else ->
				pw[a*NR+r] = false;
				/* P1 no row is retired while its process lives */
				assert(!alive[r]);
				/* P2 ... nor while its worker owns a claim: one held at the authoritative
				 * read is no candidate (A2); one whose acquisition moved the fence before
				 * this row's check stops the apply (A6) */
				assert(!ob);
				/* P3 (one writer at a time) is P4 below: a takeover that resumes the
				 * apply writes rows after the applier it took over from, never while that
				 * one may still write */
				/* P6 a row is written only as the intent recorded it: unchanged since */
				assert(!imoved[r]);
				/* P7 nothing is written twice */
				assert(!retired[r]);
#ifndef MUTANT_NO_INTENT_CAS
				/* P4 only the holder of the intent writes rows */
				assert(pholder == id && pstate == S_INPROG);
#endif
				retired[r] = true; ROW_MOVED(r); done[r] = true; n++
			fi;
			ob = false
		}
nextrow:
		r++
	od;
report:
	/* A9: the report (retirement.Summarize), written by the holder only: re-read the plan,
	 * give up if another applier holds it, otherwise a write guarded by its
	 * resourceVersion (a conflict re-reads). */
	inwin[a] = false;
	atomic {
		if
		ABORT
		:: true -> skip
		fi;
		pmoved[a] = false;
#ifndef MUTANT_NO_INTENT_CAS
		if
		:: pholder != id || pstate != S_INPROG -> goto top
		:: else -> skip
		fi;
#else
		if
		:: pstate == S_FINISHED -> goto top
		:: else -> skip
		fi;
#endif
	}
	atomic {
		if
		ABORT
		:: pmoved[a] -> goto report
		:: else ->
			pstate = S_FINISHED; pholder = 0;
			rep[0] = done[0]; rep[1] = done[1]; rep[2] = done[2];
			PLAN_MOVED
		fi
	}
	goto out;

stopreport:
	/* A stop before any write: the outcome alone, guarded by the plan's resourceVersion. */
	atomic {
		if
		ABORT
		:: pmoved[a] -> goto top
		:: else -> pstate = S_FINISHED; pholder = 0; PLAN_MOVED
		fi
	}
	goto out;

takeover:
	/* T1: the takeover, guarded by the plan's resourceVersion: this applier becomes the
	 * holder of an InProgress record whose renewedAt is older than the takeover timeout. */
	atomic {
		if
		ABORT
		:: pmoved[a] -> goto top
		:: else -> pholder = id; pstale = false; PLAN_MOVED; inwin[a] = true; takes++
		fi
	}
	/* The approval is judged again (stillApproved, not modelled): no longer honoured, the
	 * taker completes the report instead (T2-T3). */
	if
	:: true -> inwin[a] = false; goto complete
	:: true -> skip
	fi;
	/* R1: read the workflow fence, before the authoritative read */
	atomic { if ABORT :: true -> fmoved[a] = false fi }
	/* R2: the authoritative read of the rows and the task claims, a liveness probe of each,
	 * and retirement.DecideResume: an intended row retired by this plan counts as retired;
	 * any other is written only if unchanged since the intent recorded it (else
	 * row_changed_since_plan) and still a candidate (not alive, no claim); its write
	 * carries that resourceVersion. */
	atomic {
		if
		ABORT
		:: true ->
			for (r : 0 .. NR-1) {
				rmoved[a*NR+r] = false;
				done[r] = intended[r] && retired[r];
#ifndef MUTANT_RESUME_NO_REVALIDATE
#ifndef MUTANT_RESUME_NO_VERSION
				cand[r] = intended[r] && !retired[r] && !imoved[r] && !alive[r] && !claimobj[r]
#else
				cand[r] = intended[r] && !retired[r] && !alive[r] && !claimobj[r]
#endif
#else
				cand[r] = intended[r] && !retired[r]; resumed = true
#endif
			}
			r = 0
		fi
	}
	goto rows;

complete:
	/* T2: re-read the rows: retired are the intended rows whose retiredBy is this plan. It
	 * writes no row. */
	atomic {
		if
		ABORT
		:: true -> skip
		fi;
		done[0] = intended[0] && retired[0];
		done[1] = intended[1] && retired[1];
		done[2] = intended[2] && retired[2]
	}
	/* T3: the report (success false; the other intended rows apply_interrupted), written
	 * as in A9. */
	goto report;

crash:
	/* The applier crashes: its incarnation is gone; it may come back as a new applier. */
	atomic {
		crashes++;
		dead[id-1] = true;
		inwin[a] = false;
		if
		:: r < NR -> pw[a*NR+r] = false; ob = false
		:: else -> skip
		fi;
		if
		:: inc[a] == 0 -> inc[a] = 1
		:: else -> goto out
		fi
	}
	goto start;
out:
	skip
}

/* Workers, at any step, at most NEV events in all. */
#define EVENTS(r) \
	/* the row's process runs again (never between a re-probe and its write: A-L) */ \
	:: atomic { events < NEV && !alive[r] && !pw[r] && !pw[NR+r] -> alive[r] = true; events++ } \
	/* a live worker heartbeats, or someone edits a row (a label): its resourceVersion \
	 * moves, and a dead row stays a candidate */ \
	:: atomic { events < NEV && !retired[r] -> ROW_MOVED(r); events++ } \
	/* the worker creates a TaskClaim: a workflow owner from now on */ \
	:: atomic { events < NEV && !claimobj[r] -> claimobj[r] = true; events++ } \
	/* the claim reaches its claim step and moves the fence (workflowfence.Fence.Bump) */ \
	:: atomic { claimobj[r] && !bumped[r] -> bumped[r] = true; fmoved[0] = true; fmoved[1] = true }

proctype Workers() {
	do
	EVENTS(0)
	EVENTS(1)
	EVENTS(2)
	:: break
	od
}

/* The takeover timeout elapses: only while the holder has crashed, or cannot write a
 * row before its next renewal (assumption A-T). */
proctype Clock() {
	do
	:: atomic { pstate == S_INPROG && !pstale && pholder != 0 && takes < MAXTAKE &&
#ifndef MUTANT_TAKEOVER_EARLY
	            (dead[pholder-1] || !inwin[(pholder-1)/2]) &&
#endif
	            true -> pstale = true }
	:: break
	od
}

/* The fleet coordinator's stand-in for the agent of a host that counts as lost
 * (controllers/retirementplan/hostloss.go). The agent may only seem lost (a partition,
 * a slow renewal) and still apply, so the stand-in may act at any time. L1: it reads the
 * plan. L2: when no apply has started, it closes the plan with a report that retires
 * nothing (retirement.LostHostApply) and the HostAgentLost condition, in one write
 * guarded by the plan's resourceVersion; a conflict re-reads. An apply in progress it
 * leaves to the takeover (T1-T3, as for any applier). */
proctype StandIn() {
top:
	atomic {
		/* L1 */
		pmoved[NA] = false;
		if
		:: pstate != S_NONE -> goto out
		:: else -> skip
		fi
	}
	atomic {
		/* L2 */
		if
#ifndef MUTANT_LOST_NO_CAS
		:: pmoved[NA] -> goto top
		:: else ->
#else
		:: true ->
#endif
			pstate = S_FINISHED; pholder = 0;
			rep[0] = false; rep[1] = false; rep[2] = false;
			PLAN_MOVED
		fi
	}
out:
	skip
}

init {
	atomic {
		run Applier(0);
		run Applier(1);
		run Workers();
		run Clock();
		run StandIn()
	}
}
