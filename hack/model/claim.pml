/*
 * claim.pml: the TaskClaim protocol as controllers/taskclaim implements it
 * (gather.go, acquire.go, end.go) with the decisions of internal/claim and the guarded
 * writes of internal/giteaclaim. docs/protocols.md explains the steps, the scope and
 * the assumptions; the step names (C1..C12, R1, E1..E4) appear as "model:" comments in
 * the Go code.
 *
 * Scope: NW claims (one TaskClaim per worker), NT targets (init says which claim takes
 * which target). One reconcile process per claim (controller-runtime
 * reconciles different keys concurrently, one key at a time). A manager crash, or a
 * reconcile that returns an error, aborts a reconcile at any step between two API calls:
 * its local state is lost and it starts over from what the API server and Gitea hold
 * (the restart path). Aborts are bounded by MAXFAULT (shared with Gitea transport faults).
 *
 * Switches (each must make SPIN find a counterexample; hack/model/run.sh checks it):
 *   MUTANT_NO_READBACK       activate straight after the guarded write (no verify in
 *                            Publish, no readBack of record and Lease)
 *   MUTANT_NO_CONTENT_VERSION the Gitea body write carries no content_version guard
 *   MAIN_END_ORDER           end() in its earlier order: record cleared and Lease freed
 *                            before the status stops showing the capability Active
 * Scope switches:
 *   NO_OUTSIDER              no unversioned outside write (used by the liveness run)
 *   LIVE                     the liveness run: relrev ghosts, and the worker and the
 *                            environment may stop for good (fairness must not force them)
 *   MAXFAULT, TIMEEV, TGT2, TWO_CLAIMS (below)
 */

#define NW 3
#define NT 2
#ifndef MAXFAULT
#define MAXFAULT 1
#endif

/* TaskClaim phases (internal/claim/phase.go). P_NEW is Pending, P_END stands for every
 * ended phase (Released, Completed, Expired, Revoked): they behave alike here. */
#define P_NEW 0
#define P_VAL 1
#define P_ACT 2
#define P_REJ 3
#define P_END 4
#define FINAL(c) (phase[c] == P_REJ || phase[c] == P_END)

/* Gitea claim record state: none, active, or a final state (released, ...). */
#define R_NONE 0
#define R_ACT  1
#define R_FIN  2

/* ---- the TaskClaim objects (API server) ---- */
byte tgt[NW];        /* spec.target */
bool exists[NW];     /* the object exists */
bool deleting[NW];   /* deletionTimestamp set */
bool fin[NW];        /* the claim finalizer */
bool released[NW];   /* spec.release */
byte phase[NW];      /* status.phase */
/* The pin's claim generation is the Lease resourceVersion, or "" when there was no
 * Lease. resourceVersions are only ever compared for equality, so the model keeps, per
 * claim, whether the version it holds still equals the current one. */
bool pinnone[NW];    /* the pin saw no Lease ("": the lock must be created) */
bool genmoved[NW];   /* the Lease was written since the pin was taken */
bool capmoved[NW];   /* the Lease was written since the generation the capability carries was read */
bool capread[NW];    /* c read the generation its capability carries (from C9 until it ends) */
bool odirty[NW];     /* written by the worker since its reconcile read it (resourceVersion moved) */

/* An expiry is seen only while claim c has a capability (phase Active) or its own record
 * in force: expired[c] is read nowhere else, and the next record of c (C7) starts with a
 * new expiresAt. The clock event is not spent on an expiry nobody can see. */
#define SEEN_EXPIRY(c) (!expired[c] && (phase[c] == P_ACT || (rclaim[tgt[c]] == c+1 && rstate[tgt[c]] == R_ACT)))

/* ---- the per-target lock Lease (coordination.k8s.io/v1) ---- */
bool lexists[NT];
byte lholder[NT];    /* holderIdentity: claim+1, 0 = free */
byte lowner[NT];     /* ownerReference: claim+1, 0 = none */
bool llapsed[NT];    /* renewTime + leaseDuration has passed */

/* ---- the Gitea issue body ---- */
byte rclaim[NT];     /* the record's claimID: claim+1, 0 = no record */
byte rstate[NT];
bool bodyread[NW];   /* c read the body and is about to write it (C6 to C7) */
bool bodymoved[NW];  /* the body of c's target was written since (content_version moved) */
bool expired[NW];    /* the expiresAt of claim c's latest record (= its capability's) has passed */

byte faults;         /* aborts and Gitea transport faults so far */
#ifndef TIMEEV
#define TIMEEV 1
#endif
byte clock;          /* expiries and lapses so far (at most TIMEEV per run) */
byte outside;        /* unversioned outside writes so far */

/* ---- ghosts for the properties ---- */
bool proof[NW];      /* this attempt proved its record in force after its last write */
bool tainted[NW];    /* an outside write hit the target after that proof */
bool relrev[NW];     /* release or revocation of a claim that was not final */

#define INFORCE(c) (rclaim[tgt[c]] == c+1 && rstate[tgt[c]] == R_ACT && !expired[c])
/* a capability is usable (claim.Authorize) while its phase is Active and it has not expired */
#define EFFACTIVE(c) (exists[c] && phase[c] == P_ACT && !expired[c])
#define COUNTS(c, t) (tgt[c] == t && EFFACTIVE(c) && !tainted[c])
#define ONE_ACTIVE(t) (COUNTS(0, t) + COUNTS(1, t) + COUNTS(2, t) <= 1)
#define BACKED(c) (!EFFACTIVE(c) || tainted[c] || INFORCE(c))
#define SAFE (ONE_ACTIVE(0) && ONE_ACTIVE(1) && BACKED(0) && BACKED(1) && BACKED(2))

/* P1 at most one Active capability per target, P2 no Active capability without its record
 * in force in Gitea (unless an unversioned outside write came after the claim's proof). */
ltl safety { [] SAFE }
/* P3 after release or revocation the record is eventually not in force, crashes included. */
ltl live { [] (relrev[0] -> <> !INFORCE(0)) && [] (relrev[1] -> <> !INFORCE(1)) && [] (relrev[2] -> <> !INFORCE(2)) }

/* P4 a loser is never written again: no write on behalf of a Rejected claim, except the
 * cleanup (E2-E4) of a refused claim that holds the finalizer, that is one that won the
 * Lease; those writes end only what this claim itself still holds. */
#define NOT_LOSER(c) assert(phase[c] != P_REJ)
#define CLEANUP_OK(c) assert(phase[c] != P_REJ || fin[c])

/* Each step below is one API call (or a read followed by the decision taken on it) and
 * runs atomically. Before any step the reconcile may be cut short: the manager crashes or
 * the reconcile returns an error; its local state is lost and it starts over at "top"
 * from what the API server and Gitea hold (the restart path). A read merged into the
 * guarded write that follows it loses no behaviour that matters: the write is guarded by
 * what was read (resourceVersion or content_version), so a change in between only turns
 * into a conflict, that is a retry or the same refusal. */
#define ABORT :: faults < MAXFAULT -> faults++; goto top
#define CRASHPT if :: faults < MAXFAULT -> faults++; goto top :: true -> skip fi

/* every Lease write moves its resourceVersion */
#define LMOVED1(c, i) if :: tgt[c] == i && phase[c] == P_VAL -> genmoved[c] = true :: else -> skip fi; \
	if :: tgt[c] == i && capread[c] -> capmoved[c] = true :: else -> skip fi
#define LEASE_MOVED(i) LMOVED1(0, i); LMOVED1(1, i); LMOVED1(2, i)
/* every body write moves content_version */
#define BMOVED1(c, i) if :: tgt[c] == i && bodyread[c] -> bodymoved[c] = true :: else -> skip fi
#define BODY_MOVED(i) BMOVED1(0, i); BMOVED1(1, i); BMOVED1(2, i)
#define GC(i) lexists[i] = false; lholder[i] = 0; lowner[i] = 0; llapsed[i] = false; LEASE_MOVED(i)
#ifndef NO_OUTSIDER
#define PROVE(c) proof[c] = true
#define UNPROVE(c) proof[c] = false; tainted[c] = false
#else
#define PROVE(c) skip
#define UNPROVE(c) skip
#endif
#ifdef LIVE
#define RELREV(c) relrev[c] = true
#else
#define RELREV(c) skip
#endif
#define TAINT(c, i) if :: tgt[c] == i && proof[c] -> tainted[c] = true :: else -> skip fi
/* another Gitea client writes the body from a copy taken before the claim block was
 * written, without content_version: the record is gone */
#define OUTSIDE(i) outside++; rclaim[i] = 0; rstate[i] = R_NONE; BODY_MOVED(i); TAINT(0, i); TAINT(1, i); TAINT(2, i)
/* a body write landing */
#define WRITE_BODY(t, who, st) rclaim[t] = who; rstate[t] = st; BODY_MOVED(t)

/* foreign: another claim's record in force, or a foreign Lease holder that has not lapsed */
#define FOREIGN_REC(c, t) (rstate[t] == R_ACT && rclaim[t] != 0 && rclaim[t] != c+1 && !expired[rclaim[t]-1])
#define FOREIGN_LEASE(c, t) (lexists[t] && lholder[t] != 0 && lholder[t] != c+1 && !llapsed[t])
/* the Lease is still at the pinned generation */
#define AT_PIN(c, t) ((pinnone[c] && !lexists[t]) || (!pinnone[c] && lexists[t] && !genmoved[c]))
/* releaseLease: Get, and an Update guarded by that resourceVersion if this claim holds it */
#define RELEASE(c, t) if :: lexists[t] && lholder[t] == c+1 -> NOT_LOSER(c); lholder[t] = 0; lowner[t] = 0; LEASE_MOVED(t) :: else -> skip fi
#define CLEANUP_RELEASE(c, t) if :: lexists[t] && lholder[t] == c+1 -> CLEANUP_OK(c); lholder[t] = 0; lowner[t] = 0; LEASE_MOVED(t) :: else -> skip fi
/* the status write of a step, guarded by the object's resourceVersion */
#define OBJ_OK(c) (exists[c] && !odirty[c])

proctype Rec(byte c) {
	byte t;
	t = tgt[c];
top:
	/* Reconcile reads the claim from the API server and claim.NextStep says what to do.
	 * Validation (C1, C2), CheckActive (C11), the start of end (E1) and the claim's first
	 * steps (C3 to C6) read everything they decide on and then write; each is one step. */
	atomic {
		odirty[c] = false; bodyread[c] = false; bodymoved[c] = false;
		if
		:: !exists[c] -> goto done
		:: exists[c] && FINAL(c) -> goto final
		:: exists[c] && !FINAL(c) && (deleting[c] || (phase[c] != P_ACT && released[c])) ->
			/* C12: deletion or release gives the task back (StepGiveBack) */
			RELREV(c); goto endclaim
		:: exists[c] && !FINAL(c) && !deleting[c] && phase[c] == P_ACT ->
			/* C11: claim.CheckActive on fresh state: release, expiry, ownership loss
			 * (record not this claim's or not in force, Lease holder or generation moved) */
			if
			:: released[c] || expired[c] || !INFORCE(c) || !lexists[t] || lholder[t] != c+1 || capmoved[c] ->
				RELREV(c); goto endclaim
			:: else -> goto top          /* RequeueAfter: looked at again */
			fi
		:: exists[c] && !deleting[c] && phase[c] == P_NEW && !released[c] ->
			/* C1: claim.Validate on fresh state refuses a foreign record or holder;
			 * C2: markValidated pins the Lease generation */
			if
			:: FOREIGN_REC(c, t) || FOREIGN_LEASE(c, t) -> goto reject
			:: else -> NOT_LOSER(c); phase[c] = P_VAL; pinnone[c] = !lexists[t]; genmoved[c] = false;
				/* the worker copies the pin into spec.pin: merged into this step, as only
				 * c's next step (C3) depends on it (so StepAwaitPin never shows), and
				 * from here on a claim has a pin exactly when its phase is not Pending */
				goto top
			fi
		:: exists[c] && !deleting[c] && phase[c] == P_VAL && !released[c] ->
			UNPROVE(c); capread[c] = false; capmoved[c] = false;
			/* C3, the Lease half (claim.PrecheckClaim): the Lease is read first and a claim
			 * it shows lost is refused at once, unless this claim already holds it (an
			 * attempt cut short: AlreadyHeld, only a Get). The rest of C3, the re-read of
			 * the target, which writes nothing, follows C4 and C5 (below). */
			if
			:: FOREIGN_LEASE(c, t) -> goto reject
			:: !FOREIGN_LEASE(c, t) && lexists[t] && lholder[t] == c+1 -> skip
			:: !FOREIGN_LEASE(c, t) && !(lexists[t] && lholder[t] == c+1) && !AT_PIN(c, t) ->
				goto reject                  /* claim_generation_advanced */
			:: !FOREIGN_LEASE(c, t) && !(lexists[t] && lholder[t] == c+1) && AT_PIN(c, t) ->
				/* (the workflow fence is bumped here: apply.pml) */
				/* C4: the Lease compare-and-swap at the pinned generation (claim.LockPlan):
				 * Create when the pin saw no Lease, an Update carrying the pinned
				 * resourceVersion otherwise; the Lease is owned by the claim while held.
				 * (Merged with the read it decides on, like every guarded write here.) */
				NOT_LOSER(c); lexists[t] = true; lholder[t] = c+1; lowner[t] = c+1; llapsed[t] = false; LEASE_MOVED(t)
			fi;
c5:
			/* C5: the finalizer (an Update guarded by the object's resourceVersion); on
			 * failure the Lease is given back and the error returned. C5 and C6 touch
			 * nothing another process reads or writes between them (only the worker's
			 * own writes to the object, which C5 checks), so they run on from C4 in one
			 * step; the crash points between them remain. */
			CRASHPT;
			if
			:: fin[c] -> skip
			:: !fin[c] && OBJ_OK(c) -> fin[c] = true
			:: !fin[c] && !OBJ_OK(c) -> RELEASE(c, t); goto top
			fi;
			CRASHPT;
			/* C3, the rest (claim.DecideClaim on the re-read of the target, read after C4
			 * and C5; its content_version guards C7, so it merges into C6):
			 * a record of another claim in force refuses, and so may what the model does
			 * not track (a stale target, the worker, another claim of the worker). A claim
			 * refused here holds the Lease and the finalizer, and finishes at "final".
			 * C6: Publish takes the issue as that read saw it: this claim's own record no
			 * longer in force is never revived. */
			if
			:: rclaim[t] == c+1 && !(rstate[t] == R_ACT && !expired[c]) -> goto reject
			:: FOREIGN_REC(c, t) -> goto reject          /* claim_record_not_ours */
			:: true -> goto reject                       /* refused on the re-read */
			:: !(rclaim[t] == c+1 && !(rstate[t] == R_ACT && !expired[c])) && !FOREIGN_REC(c, t) ->
				bodyread[c] = true; bodymoved[c] = false    /* the content_version it read */
			fi
		fi
	}
	/* C7: the PATCH of the body guarded by content_version. A transport fault may land or
	 * not; either way Publish fails (unverified) and the claim gives up. */
	atomic {
		bodyread[c] = false;
		if
		ABORT
		:: faults < MAXFAULT -> faults++;
			if
			:: !bodymoved[c] -> NOT_LOSER(c); WRITE_BODY(t, c+1, R_ACT); expired[c] = false
			:: true -> skip
			fi;
			goto reject
#ifdef MUTANT_NO_CONTENT_VERSION
		:: true -> NOT_LOSER(c); WRITE_BODY(t, c+1, R_ACT); expired[c] = false
#else
		:: !bodymoved[c] -> NOT_LOSER(c); WRITE_BODY(t, c+1, R_ACT); expired[c] = false
		:: bodymoved[c] -> goto reject               /* 409: content_version_conflict */
#endif
		fi
	}
	atomic {
#ifndef MUTANT_NO_READBACK
		/* C8: Publish verifies that the record in force is exactly the one written; C9:
		 * the readBack of both halves (Gitea.Read, the Lease Get) for claim.Activate. */
		if
		ABORT
		:: INFORCE(c) && lexists[t] && lholder[t] == c+1 -> PROVE(c); capread[c] = true; capmoved[c] = false
		:: else -> goto reject                       /* lease_not_held, claim_not_published, ... */
		fi;
#else
		/* mutant: the write's reply is taken as the proof */
		PROVE(c); capread[c] = true; capmoved[c] = false;
#endif
		/* C10: activation, markActive: a status write guarded by the object's
		 * resourceVersion. It touches only the claim object, so it follows the read-back
		 * in one step, with a crash point between them. */
		CRASHPT;
		if
		:: OBJ_OK(c) -> NOT_LOSER(c); phase[c] = P_ACT; genmoved[c] = false; pinnone[c] = false   /* dead once Active: reset so states merge */
		:: else -> skip
		fi;
		goto top
	}

reject:
	/* R1: reject, markRejected: the final refusal, a status write guarded by the object's
	 * resourceVersion. A claim that holds the finalizer (it won the Lease at C4) then
	 * finishes (E2-E4, at "final"): whatever it may have published is ended and the Lease
	 * freed before the finalizer goes. A failed write is retried from the top. */
	atomic {
		if
		ABORT
		:: OBJ_OK(c) -> NOT_LOSER(c); phase[c] = P_REJ; UNPROVE(c); capread[c] = false; capmoved[c] = false; genmoved[c] = false; pinnone[c] = false
		:: else -> skip
		fi;
		goto top
	}

endclaim:
#ifdef MAIN_END_ORDER
	/* end() in its earlier order: E2 clear the record (holdsRecord: a capability, or this
	 * claim's own active record), E3 free the Lease, then E1 the status. */
	atomic {
		if
		ABORT
		:: phase[c] != P_NEW && rclaim[t] == c+1 && rstate[t] == R_ACT ->   /* a capability or a pin */
			if
			:: faults < MAXFAULT -> faults++;
				if
				:: true -> WRITE_BODY(t, c+1, R_FIN)
				:: true -> skip
				fi;
				goto top
			:: true -> WRITE_BODY(t, c+1, R_FIN)
			fi
		:: else -> skip
		fi
	}
	atomic {
		if
		ABORT
		:: phase[c] != P_NEW -> RELEASE(c, t)   /* a pin */
		:: else -> skip
		fi
	}
	atomic {
		if
		ABORT
		:: OBJ_OK(c) -> NOT_LOSER(c); phase[c] = P_END; UNPROVE(c); capread[c] = false; capmoved[c] = false; genmoved[c] = false; pinnone[c] = false
		:: else -> skip
		fi;
		goto top
	}
#else
	/* E1: markEnded first: from this write on the capability no longer shows Active */
	atomic {
		if
		ABORT
		:: OBJ_OK(c) -> NOT_LOSER(c); phase[c] = P_END; UNPROVE(c); capread[c] = false; capmoved[c] = false; genmoved[c] = false; pinnone[c] = false
		:: else -> skip
		fi;
		goto top
	}
#endif

final:
	/* StepFinish: a final claim (ended or refused) that holds the finalizer finishes: E2
	 * ends its own record if still in force (Clear, guarded by content_version; a 409 is
	 * retried, a fault returns the error), E3 frees the Lease if it still holds it, and
	 * E4 (below) sets RecordCleared and drops the finalizer. A crash between RecordCleared
	 * and the finalizer's removal re-runs E2 and E3 here, where they find nothing left of
	 * this claim (its record and its Lease can only have passed to others), so RecordCleared
	 * and the finalizer's removal are one step, E4. StepNone: only E4. */
	if
	:: fin[c] ->
		atomic {
			if
			ABORT
			:: rclaim[t] == c+1 && rstate[t] == R_ACT ->
				if
				:: faults < MAXFAULT -> faults++;
					if
					:: true -> CLEANUP_OK(c); WRITE_BODY(t, c+1, R_FIN)
					:: true -> skip
					fi;
					goto top
				:: true -> CLEANUP_OK(c); WRITE_BODY(t, c+1, R_FIN)
				fi
			:: else -> skip
			fi
		}
		atomic {
			if
			ABORT
			:: true -> CLEANUP_RELEASE(c, t)
			fi
		}
	:: else -> skip
	fi;
	/* E4: the finalizer goes (an Update; a conflict is retried); the object goes with it
	 * once deleted */
	atomic {
		if
		ABORT
		:: !exists[c] -> goto done
		:: fin[c] && !OBJ_OK(c) -> goto top
		:: fin[c] && OBJ_OK(c) -> fin[c] = false;
			if
			:: deleting[c] -> exists[c] = false
			:: else -> skip
			fi
		:: !fin[c] -> skip
		fi
	}
done:
	skip
}

/* The worker gives its claim back once, at any time: spec.release or (worker 0) a
 * deletion (each write moves the object's resourceVersion), or never. "Never" is a
 * separate option only in the liveness run, where weak fairness would otherwise force
 * the give-back: for safety a worker that has not acted yet already stands for it (it
 * reaches every state a worker that gave up acting reaches), so the safety runs leave
 * the option out and lose no state of the shared variables. */
proctype Worker(byte c) {
end:	/* a valid end state: in the safety runs a worker that no longer can act waits here */
	atomic {
		if
		:: exists[c] && !deleting[c] && !released[c] ->
			/* spec.release */
			released[c] = true; odirty[c] = true;
			if :: !FINAL(c) -> RELREV(c) :: else -> skip fi
		:: c == 0 && exists[c] && !deleting[c] && !released[c] ->
			/* kubectl delete: with the finalizer a deletionTimestamp, without it the object
			 * goes at once (and the garbage collector removes a Lease it owns) */
			if :: !FINAL(c) -> RELREV(c) :: else -> skip fi;
			if
			:: fin[c] -> deleting[c] = true; odirty[c] = true
			:: else -> exists[c] = false
			fi
#ifdef LIVE
		:: true -> skip          /* the worker gives nothing back */
#endif
		fi
	}
}

/* Time, the garbage collector and other Gitea users: three processes. */

/* Time: a record's expiresAt passes, or a holder's Lease lapses, at most TIMEEV times. In
 * the liveness run time may stop for good (the budget is marked spent without an event),
 * so no expiry or lapse is ever forced by fairness; in the safety runs the stop is left
 * out, as the worker's "never" is (a clock that may still fire reaches every state a
 * stopped one reaches). */
proctype Clock() {
end:	/* a valid end state: nothing left to happen */
	do
#ifndef NO_TIME
	/* a record's (and so its capability's) expiresAt passes */
	:: atomic { clock < TIMEEV && SEEN_EXPIRY(0) -> expired[0] = true; clock++ }
	:: atomic { clock < TIMEEV && SEEN_EXPIRY(1) -> expired[1] = true; clock++ }
	:: atomic { clock < TIMEEV && SEEN_EXPIRY(2) -> expired[2] = true; clock++ }
	/* a holder's Lease lapses, at any time (clock skew; a restarted attempt does not renew) */
	:: atomic { clock < TIMEEV && lexists[0] && lholder[0] != 0 && !llapsed[0] -> llapsed[0] = true; clock++ }
	:: atomic { clock < TIMEEV && lexists[1] && lholder[1] != 0 && !llapsed[1] -> llapsed[1] = true; clock++ }
#endif
#ifdef LIVE
	:: atomic { clock < TIMEEV -> clock = TIMEEV }   /* time stops for good: the budget goes unspent */
#endif
	od
}

/* The garbage collector removes a Lease whose owner is gone. It is a controller of the
 * API server: in the liveness run weak fairness makes it do so eventually (assumption). */
proctype Gc() {
end:	/* a valid end state: nothing to collect */
	do
	:: atomic { lexists[0] && lowner[0] != 0 && !exists[lowner[0]-1] -> GC(0) }
	:: atomic { lexists[1] && lowner[1] != 0 && !exists[lowner[1]-1] -> GC(1) }
	od
}

#ifndef NO_OUTSIDER
/* Another Gitea client writes the body without content_version (a stale copy), once. */
proctype Outsider() {
end:	/* a valid end state: it never writes, or has written */
	do
	:: atomic { outside < 1 && rclaim[0] != 0 -> OUTSIDE(0) }
	:: atomic { outside < 1 && rclaim[1] != 0 -> OUTSIDE(1) }
	od
}
#endif

/* Claims and targets are symmetric: claims 0 and 1 contend for target 0; claim 2 takes
 * target TGT2 (1 by default: "3 workers, 2 targets"; 0: all three contend for one).
 * TWO_CLAIMS leaves claim 2 out (no object, no processes: a smaller model for
 * experiments). */
#ifndef TGT2
#define TGT2 1
#endif

init {
	atomic {
		exists[0] = true; exists[1] = true;
		tgt[0] = 0; tgt[1] = 0; tgt[2] = TGT2;
		run Rec(0); run Worker(0);
		run Rec(1); run Worker(1);
#ifndef TWO_CLAIMS
		exists[2] = true;
		run Rec(2); run Worker(2);
#endif
		run Clock(); run Gc()
#ifndef NO_OUTSIDER
		; run Outsider()
#endif
	}
}
