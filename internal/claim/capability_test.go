package claim

import (
	"slices"
	"testing"
	"time"
)

func activateBase(t *testing.T) (ValidateInput, ActivateInput) {
	t.Helper()
	vin := prIn()
	v := mustValidate(t, vin)
	acq, r := DecideClaim(fxClaimInput(vin, v))
	if r.Refused() {
		t.Fatalf("claim refused: %+v", r)
	}
	return vin, ActivateInput{
		Validation:      acq.Validation,
		ClaimID:         vin.ClaimID,
		LeaseName:       "lease-target",
		LeaseGeneration: "301",
		LeaseHolder:     vin.ClaimID,
		Record:          fxOwnRecord(vin),
		Now:             vin.Now,
	}
}

// TestActivateBindsEightDimensions: an activated capability is bound to the
// worker, repository, target, role, operations, pin, claim/lease and expiry.
func TestActivateBindsEightDimensions(t *testing.T) {
	vin, ain := activateBase(t)
	c, r := Activate(ain)
	if c == nil || r.Outcome != OutcomeAcquired || r.Refused() || r.Target != vin.Requested {
		t.Fatalf("activation: %+v %+v", c, r)
	}
	checks := []struct {
		dimension string
		ok        bool
	}{
		{"worker", c.Worker == "w1" && c.Identity == "carol"},
		{"repository", c.Repository == fxRepo},
		{"target", c.Target == fxPR()},
		{"role", c.Role == RoleReviewer},
		{"operations", slices.Equal(c.Operations, []string{OpReview, OpComment})},
		{"pin", c.Pin == ain.Validation.Pin && pinShape.MatchString(c.Pin)},
		{"claim/lease", c.ClaimID == fxClaimID && c.LeaseName == "lease-target" && c.LeaseGeneration == "301"},
		{"expiry", c.ExpiresAt.Equal(ain.Record.ExpiresAt)},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("dimension %s not bound: %+v", ch.dimension, c)
		}
	}
}

// TestActivateRequiresPublishedClaim: activation is unavailable until the
// authoritative Gitea record is this claim's and in force; a held Lease alone
// (a transient reservation) activates nothing.
func TestActivateRequiresPublishedClaim(t *testing.T) {
	tests := []struct {
		name  string
		mut   func(*ActivateInput)
		pred  string
		class Class
	}{
		{"lease held, no record yet", func(in *ActivateInput) { in.Record = nil }, "claim_not_published", ClassStaleState},
		{"record of another claim", func(in *ActivateInput) { in.Record = foreignRecord() }, "claim_record_not_ours", ClassContention},
		{"record of this claim id, other worker", func(in *ActivateInput) { in.Record.Worker = "rival-worker" }, "claim_record_not_ours", ClassContention},
		{"record of this claim id, other identity", func(in *ActivateInput) { in.Record.Identity = "rivalperson" }, "claim_record_not_ours", ClassContention},
		{"record released", func(in *ActivateInput) { in.Record.State = RecordStateReleased }, "claim_record_inactive", ClassStaleState},
		{"record already expired", func(in *ActivateInput) { in.Record.ExpiresAt = in.Now }, "claim_record_inactive", ClassStaleState},
		{"record without expiry", func(in *ActivateInput) { in.Record.ExpiresAt = time.Time{} }, "claim_record_inactive", ClassStaleState},
		{"lease held by another", func(in *ActivateInput) { in.LeaseHolder = "rival-claim-9191" }, "lease_not_held", ClassContention},
		{"lease without generation", func(in *ActivateInput) { in.LeaseGeneration = "" }, "lease_not_held", ClassContention},
		{"no claim id", func(in *ActivateInput) { in.ClaimID, in.LeaseHolder = "", "" }, "lease_not_held", ClassContention},
		{"validation tampered", func(in *ActivateInput) { in.Validation.Role = RoleMerger }, "pin_mismatch", ClassStaleState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, in := activateBase(t)
			tt.mut(&in)
			c, r := Activate(in)
			if c != nil {
				t.Fatalf("capability activated: %+v", c)
			}
			if r.Outcome != OutcomeNotAcquired || r.FailedPredicate != tt.pred || r.Class != tt.class {
				t.Fatalf("got %+v, want %s %s", r, tt.class, tt.pred)
			}
			assertTypedLoss(t, r, in.Validation.Target)
		})
	}
}

// TestNeutralWorkerHoldsNothing: before selection (and after the capability
// ends) a worker has no capability, and every task operation is refused.
func TestNeutralWorkerHoldsNothing(t *testing.T) {
	ops := []string{OpPushBranch, OpOpenPullRequest, OpComment, OpReview, OpApprove, OpMerge}
	for _, op := range ops {
		ok, reason := Authorize(nil, false, Query{Worker: "w1", Repository: fxRepo, Target: fxPR(), Operation: op, Now: fxNow})
		if ok || reason != ReasonNoCapability {
			t.Fatalf("neutral worker allowed %s (%s)", op, reason)
		}
	}
	// Validation alone grants nothing: it yields a pin, not a capability.
	v := mustValidate(t, prIn())
	if v.Role != RoleReviewer || v.Pin == "" {
		t.Fatalf("validation %+v", v)
	}
	if RoleNone != "" || OperationsFor(RoleNone) != nil {
		t.Fatal("the neutral role must be empty and permit nothing")
	}
}

func TestAuthorize(t *testing.T) {
	c := fxCapability(t, prIn())
	ok := Query{Worker: "w1", Repository: fxRepo, Target: fxPR(), Operation: OpReview, Now: fxNow}
	tests := []struct {
		name    string
		cap     *Capability
		revoked bool
		mut     func(*Query)
		reason  string
	}{
		{"allowed review", &c, false, func(*Query) {}, ""},
		{"allowed comment", &c, false, func(q *Query) { q.Operation = OpComment }, ""},
		{"allowed, other case", &c, false, func(q *Query) {
			q.Repository, q.Target.Repository = "Fleet/App", "FLEET/APP"
			q.Target.HeadSHA = "C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFE"
		}, ""},
		{"neutral", nil, false, func(*Query) {}, ReasonNoCapability},
		{"revoked", &c, true, func(*Query) {}, ReasonRevoked},
		{"expired", &c, false, func(q *Query) { q.Now = c.ExpiresAt }, ReasonExpired},
		{"wrong worker", &c, false, func(q *Query) { q.Worker = "w2" }, ReasonWrongWorker},
		{"wrong repository", &c, false, func(q *Query) { q.Repository = "fleet/ops" }, ReasonWrongRepository},
		{"target in wrong repository", &c, false, func(q *Query) { q.Target.Repository = "fleet/ops" }, ReasonWrongRepository},
		{"wrong number", &c, false, func(q *Query) { q.Target.Number = 58 }, ReasonWrongTarget},
		{"wrong kind", &c, false, func(q *Query) { q.Target.Kind, q.Target.HeadSHA = KindIssue, "" }, ReasonWrongTarget},
		{"wrong head", &c, false, func(q *Query) { q.Target.HeadSHA = fxOtherHead }, ReasonWrongHead},
		{"no head", &c, false, func(q *Query) { q.Target.HeadSHA = "" }, ReasonWrongHead},
		{"approve as reviewer", &c, false, func(q *Query) { q.Operation = OpApprove }, ReasonOperationNotPermitted},
		{"merge as reviewer", &c, false, func(q *Query) { q.Operation = OpMerge }, ReasonOperationNotPermitted},
		{"push as reviewer", &c, false, func(q *Query) { q.Operation = OpPushBranch }, ReasonOperationNotPermitted},
		{"unknown operation", &c, false, func(q *Query) { q.Operation = "delete_branch" }, ReasonOperationNotPermitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := ok
			tt.mut(&q)
			allowed, reason := Authorize(tt.cap, tt.revoked, q)
			if allowed != (tt.reason == "") || reason != tt.reason {
				t.Fatalf("Authorize = %v %q, want %q", allowed, reason, tt.reason)
			}
		})
	}
}

func TestAuthorizeRejectsWidenedCapability(t *testing.T) {
	c := fxCapability(t, prIn())
	c.Operations = append(c.Operations, OpMerge) // widened in transit
	q := Query{Worker: "w1", Repository: fxRepo, Target: fxPR(), Operation: OpMerge, Now: fxNow}
	if ok, reason := Authorize(&c, false, q); ok || reason != ReasonOperationNotPermitted {
		t.Fatalf("widened capability allowed merge: %v %s", ok, reason)
	}
	c.ExpiresAt = time.Time{}
	if ok, reason := Authorize(&c, false, q); ok || reason != ReasonExpired {
		t.Fatalf("capability without expiry: %v %s", ok, reason)
	}
}

func TestAuthorizeIssueCapability(t *testing.T) {
	c := fxCapability(t, issueIn())
	for _, op := range []string{OpPushBranch, OpOpenPullRequest, OpComment} {
		q := Query{Worker: "w1", Repository: fxRepo, Target: fxIssue(), Operation: op, Now: fxNow}
		if ok, reason := Authorize(&c, false, q); !ok {
			t.Fatalf("author refused %s: %s", op, reason)
		}
	}
	q := Query{Worker: "w1", Repository: fxRepo, Target: fxIssue(), Operation: OpMerge, Now: fxNow}
	if ok, _ := Authorize(&c, false, q); ok {
		t.Fatal("author may merge")
	}
}
