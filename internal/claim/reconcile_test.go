package claim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNextStep(t *testing.T) {
	tests := []struct {
		name string
		v    ClaimView
		want Step
	}{
		{"new claim", ClaimView{}, StepValidate},
		{"new claim with pin", ClaimView{Pinned: true}, StepValidate},
		{"pending phase", ClaimView{Phase: PhasePending}, StepValidate},
		{"validated, no pin", ClaimView{Phase: PhaseValidated, Validated: true}, StepAwaitPin},
		{"validated, pinned", ClaimView{Phase: PhaseValidated, Validated: true, Pinned: true}, StepClaim},
		{"given back before validation", ClaimView{GivenBack: true}, StepGiveBack},
		{"given back after pin", ClaimView{Phase: PhaseValidated, Validated: true, Pinned: true, GivenBack: true}, StepGiveBack},
		{"active", ClaimView{Phase: PhaseActive, Validated: true, Pinned: true}, StepCheckActive},
		{"active and given back: the check ends it", ClaimView{Phase: PhaseActive, Validated: true, Pinned: true, GivenBack: true}, StepCheckActive},
	}
	for _, p := range []string{PhaseRejected, PhaseReleased, PhaseCompleted, PhaseExpired, PhaseRevoked} {
		tests = append(tests, struct {
			name string
			v    ClaimView
			want Step
		}{"final " + p, ClaimView{Phase: p, Validated: true, Pinned: true, GivenBack: true}, StepNone})
	}
	for _, tt := range tests {
		if got := NextStep(tt.v); got != tt.want {
			t.Errorf("%s: NextStep(%+v) = %s, want %s", tt.name, tt.v, got, tt.want)
		}
	}
}

func TestFinalPhase(t *testing.T) {
	for p, want := range map[string]bool{
		"": false, PhasePending: false, PhaseValidated: false, PhaseActive: false,
		PhaseRejected: true, PhaseReleased: true, PhaseCompleted: true, PhaseExpired: true, PhaseRevoked: true,
		"Unknown": false,
	} {
		if got := FinalPhase(p); got != want {
			t.Errorf("FinalPhase(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestWorkflowOwners(t *testing.T) {
	holdings := []Holding{
		{Worker: "w-new", Phase: ""},
		{Worker: "w-validated", Phase: PhaseValidated},
		{Worker: "w-active", Phase: PhaseActive},
		{Worker: "w-active", Phase: PhaseActive}, // two claims, one owner
		{Worker: "w-deleting", Phase: PhaseActive, Deleting: true},
		{Worker: "w-rejected", Phase: PhaseRejected},
		{Worker: "w-released", Phase: PhaseReleased},
		{Worker: "w-completed", Phase: PhaseCompleted},
		{Worker: "w-expired", Phase: PhaseExpired},
		{Worker: "w-revoked", Phase: PhaseRevoked},
		{Worker: "a-unknown", Phase: "Weird"}, // not provably finished: protected
	}
	want := []string{"a-unknown", "w-active", "w-new", "w-validated"}
	if got := WorkflowOwners(holdings); !slices.Equal(got, want) {
		t.Fatalf("WorkflowOwners = %v, want %v", got, want)
	}
	if got := WorkflowOwners(nil); got != nil {
		t.Fatalf("WorkflowOwners(nil) = %v, want nil", got)
	}
}

func TestEndPhaseAndEnding(t *testing.T) {
	tests := []struct {
		trigger Trigger
		phase   string
		ending  Ending
	}{
		{TriggerRelease, PhaseReleased, Ending{Record: RecordStateReleased, Event: EventReleased}},
		{ExpiryCycleComplete, PhaseCompleted, Ending{Record: RecordStateCompleted, Event: EventCompleted}},
		{ExpiryExpired, PhaseExpired, Ending{Record: RecordStateExpired, Event: EventExpired}},
		{TriggerBlock, PhaseRevoked, Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: TriggerBlock}},
		{TriggerFailedValidation, PhaseRevoked, Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: TriggerFailedValidation}},
		{TriggerStaleState, PhaseRevoked, Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: TriggerStaleState}},
		{TriggerOwnershipLoss, PhaseRevoked, Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: TriggerOwnershipLoss}},
	}
	for _, tt := range tests {
		phase := EndPhase(tt.trigger)
		if phase != tt.phase {
			t.Errorf("EndPhase(%s) = %s, want %s", tt.trigger, phase, tt.phase)
		}
		if got := EndingFor(phase, tt.trigger); got != tt.ending {
			t.Errorf("EndingFor(%s, %s) = %+v, want %+v", phase, tt.trigger, got, tt.ending)
		}
		if !FinalPhase(phase) || !tt.ending.Record.Final() || !tt.ending.Event.Valid() {
			t.Errorf("%s: ending is not final: phase %s, record %s, event %s", tt.trigger, phase, tt.ending.Record, tt.ending.Event)
		}
		if tt.ending.Trigger != "" && !tt.ending.Trigger.Revocation() {
			t.Errorf("%s: audit names a trigger that is no revocation", tt.trigger)
		}
	}
}

func TestPublicationRefusal(t *testing.T) {
	target := fxIssue()
	tests := []struct {
		f         PublishFailure
		predicate string
		class     Class
	}{
		{PublishConflict, PredicateContentVersionConflict, ClassContention},
		{PublishForeign, PredicateClaimRecordNotOurs, ClassContention},
		{PublishUnavailable, "claim_not_published", ClassStaleState},
		{PublishFailure("anything else"), "claim_not_published", ClassStaleState},
	}
	for _, tt := range tests {
		res := PublicationRefusal(tt.f, target)
		if !res.Refused() || res.FailedPredicate != tt.predicate || res.Class != tt.class || res.RetryPermitted {
			t.Errorf("PublicationRefusal(%s) = %+v, want predicate %s class %s", tt.f, res, tt.predicate, tt.class)
		}
	}
}

func TestRecheckAfter(t *testing.T) {
	tests := []struct {
		name    string
		left    time.Duration
		recheck time.Duration
		want    time.Duration
	}{
		{"far expiry: the recheck interval", 2 * time.Hour, 0, DefaultActiveRecheck},
		{"far expiry, custom interval", 2 * time.Hour, 5 * time.Second, 5 * time.Second},
		{"expiry before the next recheck", 10 * time.Second, 0, 10 * time.Second},
		{"expiry imminent: at least a second", 10 * time.Millisecond, 0, time.Second},
		{"already expired: at least a second", -time.Minute, 0, time.Second},
		{"tiny interval: at least a second", time.Hour, time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		if got := RecheckAfter(fxNow.Add(tt.left), fxNow, tt.recheck); got != tt.want {
			t.Errorf("%s: RecheckAfter = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestLockName(t *testing.T) {
	named := RepositoryKey{}
	a := LockName(named, Target{Repository: "Acme/Widgets", Kind: KindIssue, Number: 7})
	if a != LockName(named, Target{Repository: "acme/widgets", Kind: KindIssue, Number: 7, HeadSHA: "ignored"}) {
		t.Error("lock name depends on repository case or head")
	}
	if a == LockName(named, Target{Repository: "acme/widgets", Kind: KindPullRequest, Number: 7}) ||
		a == LockName(named, Target{Repository: "acme/widgets", Kind: KindIssue, Number: 8}) ||
		a == LockName(named, Target{Repository: "acme/gadgets", Kind: KindIssue, Number: 7}) {
		t.Error("distinct targets share a lock")
	}
	if !strings.HasPrefix(a, "fleet-claim-") || len(a) != len("fleet-claim-")+20 {
		t.Errorf("lock name %q is not fleet-claim-<20 hex>", a)
	}
	// The name is part of the state of a running fleet: changing it would orphan every
	// lock held across an upgrade.
	if got := LockName(named, Target{Repository: "acme/widgets", Kind: KindIssue, Number: 7}); got != "fleet-claim-82ee72b5fb504a19d2eb" {
		t.Errorf("LockName changed: %q", got)
	}
}

func TestLockNameOfAResolvedRepository(t *testing.T) {
	issue7 := Target{Repository: "acme/widgets", Kind: KindIssue, Number: 7}
	onA := RepositoryKey{Server: "gitea-a", ID: 42}
	a := LockName(onA, issue7)
	if !strings.HasPrefix(a, "fleet-claim-") || len(a) != len("fleet-claim-")+20 {
		t.Errorf("lock name %q is not fleet-claim-<20 hex>", a)
	}
	// The key is (server, ID, kind, number): the name the claim spells does not matter (a
	// rename changes no lock), every part of the key does.
	renamed := issue7
	renamed.Repository = "acme/gizmos"
	if LockName(onA, renamed) != a {
		t.Error("a rename moved the lock")
	}
	for _, other := range []struct {
		key RepositoryKey
		t   Target
	}{
		{RepositoryKey{Server: "gitea-b", ID: 42}, issue7},                          // same ID, other server
		{RepositoryKey{Server: "gitea-a", ID: 43}, issue7},                          // same number, other repository
		{onA, Target{Repository: "acme/widgets", Kind: KindPullRequest, Number: 7}}, // other kind
		{onA, Target{Repository: "acme/widgets", Kind: KindIssue, Number: 8}},       // other number
		{RepositoryKey{}, issue7},                                                   // the flags' repository
		{RepositoryKey{Server: "gitea-a4", ID: 2}, issue7},                          // no concatenation clash
	} {
		if LockName(other.key, other.t) == a {
			t.Errorf("%v %v shares the lock of %v %v", other.key, other.t, onA, issue7)
		}
	}
	if (RepositoryKey{}).String() != "" || onA.String() != "gitea-a/42" || !(RepositoryKey{}).Named() || onA.Named() {
		t.Error("RepositoryKey renders or reports the flags' repository wrongly")
	}
}

func TestReadiness(t *testing.T) {
	tests := []struct {
		phase          string
		ready, stalled bool
	}{
		{"", false, false},
		{PhasePending, false, false},
		{PhaseValidated, false, false},
		{PhaseActive, true, false},
		{PhaseReleased, true, false},
		{PhaseCompleted, true, false},
		{PhaseRejected, false, true},
		{PhaseExpired, false, true},
		{PhaseRevoked, false, true},
	}
	for _, tt := range tests {
		ready, stalled := Readiness(tt.phase)
		if ready != tt.ready || stalled != tt.stalled {
			t.Errorf("Readiness(%q) = (%v, %v), want (%v, %v)", tt.phase, ready, stalled, tt.ready, tt.stalled)
		}
		if FinalPhase(tt.phase) && !ready && !stalled {
			t.Errorf("final phase %q is neither Ready nor Stalled", tt.phase)
		}
	}
}

func TestAuthorizeAmong(t *testing.T) {
	in := issueIn()
	c := fxCapability(t, in)
	q := Query{Worker: c.Worker, Repository: fxRepo, Target: fxIssue(), Operation: OpComment, Now: in.Now}
	other := q
	other.Target.Number = fxIssueNumber + 1
	mine := func(phase string, cap *Capability) Held {
		return Held{Claim: "mine", Worker: c.Worker, Phase: phase, Capability: cap}
	}
	tests := []struct {
		name string
		held []Held
		q    Query
		want Answer
	}{
		{"neutral: no claims", nil, q, Answer{Reason: ReasonNoCapability}},
		{"active capability permits", []Held{mine(PhaseActive, &c)}, q, Answer{Allowed: true, Claim: "mine"}},
		{"another target: the own claim's refusal", []Held{mine(PhaseActive, &c)}, other, Answer{Reason: ReasonWrongTarget, Claim: "mine"}},
		{"ended claim counts for nothing", []Held{mine(PhaseReleased, &c)}, q, Answer{Reason: ReasonNoCapability}},
		{"active without capability counts for nothing", []Held{mine(PhaseActive, nil)}, q, Answer{Reason: ReasonNoCapability}},
		{"another worker's claim is never considered", []Held{{Claim: "theirs", Worker: "someone-else", Phase: PhaseActive, Capability: &c}}, q,
			Answer{Reason: ReasonNoCapability}},
		{"any permitting claim wins", []Held{{Claim: "first", Worker: c.Worker, Phase: PhaseActive, Capability: &c}, mine(PhaseActive, &c)}, q,
			Answer{Allowed: true, Claim: "first"}},
	}
	for _, tt := range tests {
		if got := AuthorizeAmong(tt.held, tt.q); got != tt.want {
			t.Errorf("%s: AuthorizeAmong = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestUnmappedCommitEmailFailsIndependenceClosed(t *testing.T) {
	st := fxPRState()
	if err := CheckIndependence("carol", RoleReviewer, st); err != nil {
		t.Fatalf("independent reviewer refused: %v", err)
	}
	st.UnmappedCommitEmails = []string{"someone@example.invalid"}
	for _, role := range []Role{RoleReviewer, RoleApprover, RoleMerger} {
		if err := CheckIndependence("carol", role, st); !errors.Is(err, ErrIndependenceUnprovable) {
			t.Errorf("%s with an unmapped commit e-mail: err = %v, want ErrIndependenceUnprovable", role, err)
		}
	}
	if err := CheckIndependence("carol", RoleAuthor, st); err != nil {
		t.Errorf("author role is not bound by independence: %v", err)
	}
}

func TestNextStepFinishesBeforeTheFinalizerGoes(t *testing.T) {
	for _, p := range []string{PhaseRejected, PhaseReleased, PhaseCompleted, PhaseExpired, PhaseRevoked} {
		if got := NextStep(ClaimView{Phase: p, Finalizer: true}); got != StepFinish {
			t.Errorf("final %s with finalizer, record not cleared: %s, want %s", p, got, StepFinish)
		}
		if got := NextStep(ClaimView{Phase: p, Finalizer: true, RecordCleared: true}); got != StepNone {
			t.Errorf("final %s, record cleared: %s, want %s", p, got, StepNone)
		}
		if got := NextStep(ClaimView{Phase: p}); got != StepNone {
			t.Errorf("final %s without finalizer: %s, want %s", p, got, StepNone)
		}
	}
	if got := NextStep(ClaimView{Phase: PhaseActive, Finalizer: true}); got != StepCheckActive {
		t.Errorf("active with finalizer: %s", got)
	}
}

func TestPublicationRefusalOfAForeignAssignee(t *testing.T) {
	r := PublicationRefusal(PublishAssigneeForeign, fxIssue())
	if r.FailedPredicate != "assignee_foreign" || r.Class != ClassContention || r.Blocker != BlockerForeignClaimed ||
		r.Outcome != OutcomeNotAcquired || r.RetryPermitted {
		t.Fatalf("%+v", r)
	}
	if r := PublicationRefusal(PublishForeign, fxIssue()); r.FailedPredicate != PredicateClaimRecordNotOurs {
		t.Fatalf("foreign record: %+v", r)
	}
}

func TestEndingOfARefusedClaimThatPublished(t *testing.T) {
	e := EndingFor(PhaseRejected, "")
	if e.Record != RecordStateRevoked || e.Event != EventRejected || e.Trigger != "" {
		t.Fatalf("%+v", e)
	}
}
