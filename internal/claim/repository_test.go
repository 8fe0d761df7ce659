package claim

import (
	"strings"
	"testing"
)

func TestRepositoryRefusals(t *testing.T) {
	target := Target{Repository: "acme/app", Kind: KindIssue, Number: 1}
	tests := []struct {
		name      string
		res       Result
		predicate string
		outcome   Outcome
		class     Class
	}{
		{"not served in the namespace", RepositoryNotServed(target), "controller_repository_mismatch", OutcomeRejected, ClassPolicy},
		{"not Ready", RepositoryNotReady(target), "repository_not_ready", OutcomeNotAcquired, ClassPolicy},
		{"another repository than at validation", RepositoryMoved(target), "repository_binding_changed", OutcomeNotAcquired, ClassStaleState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.res
			if !r.Refused() || r.FailedPredicate != tt.predicate || r.Outcome != tt.outcome || r.Class != tt.class {
				t.Fatalf("got %+v, want a %s refusal %s of class %s", r, tt.outcome, tt.predicate, tt.class)
			}
			if r.RetryPermitted || !r.ReassessFromFreshState || r.RuleSetDigest != RuleSetDigest() || r.Target != target {
				t.Errorf("the refusal is not final, names another target, or lacks the digest: %+v", r)
			}
		})
	}
}

// TestValidateUnserved: a request in a repository the controller does not serve is
// refused for the first rule it breaks in the rules' order, with no target state, and
// only the last of those is the repository's own refusal.
func TestValidateUnserved(t *testing.T) {
	tests := []struct {
		name      string
		mut       func(*ValidateInput)
		predicate string
		notServed bool
	}{
		{"a live worker bound to the repository", func(*ValidateInput) {}, "controller_repository_mismatch", true},
		{"a worker bound to another repository", func(in *ValidateInput) { in.Worker.Repository = "fleet/ops" }, "worker_repository_mismatch", false},
		{"no registration", func(in *ValidateInput) { in.Worker = Worker{Name: "w1"} }, "worker_not_registered", false},
		{"a denied worker", func(in *ValidateInput) { in.CapabilityVerdict = "denied" }, "capability_denied", false},
		{"a malformed target", func(in *ValidateInput) { in.Requested.Number = 0 }, "target_malformed", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The input as the reconciler builds it: no state, no controller repository.
			in := fxValidateInput(fxWorker("w1", "carol"), fxIssue(), TargetState{})
			in.ControllerRepository = fxRepo // ValidateUnserved must not rely on it
			tt.mut(&in)
			r := ValidateUnserved(in)
			if !r.Refused() || r.FailedPredicate != tt.predicate || r.NotServed() != tt.notServed {
				t.Fatalf("got %s %s (not served %v), want %s (not served %v)", r.Outcome, r.FailedPredicate, r.NotServed(), tt.predicate, tt.notServed)
			}
		})
	}
	if !RepositoryNotServed(fxIssue()).NotServed() || RepositoryNotReady(fxIssue()).NotServed() {
		t.Error("NotServed does not tell the repository's own refusal from the others")
	}
}

// The pin's repository_binding is the binding's canonical value: the flags' repository
// by its lower-cased name, as pins held it before repositories were objects; a
// GiteaRepository's by its key, which no owner/name spells and a rename does not change.
func TestCanonicalBinding(t *testing.T) {
	for _, tt := range []struct {
		binding string
		where   RepositoryKey
		want    string
	}{
		{"Fleet/App", RepositoryKey{}, "fleet/app"},
		{"Fleet/App", RepositoryKey{Server: "gitea-b", ID: 7}, "gitea:gitea-b/7"},
		{"fleet/renamed", RepositoryKey{Server: "gitea-b", ID: 7}, "gitea:gitea-b/7"},
		{"fleet/app", RepositoryKey{Server: "gitea-a", ID: 7}, "gitea:gitea-a/7"},
	} {
		if got := CanonicalBinding(tt.binding, tt.where); got != tt.want {
			t.Errorf("CanonicalBinding(%q, %v) = %q, want %q", tt.binding, tt.where, got, tt.want)
		}
	}
	in := fxValidateInput(fxWorker("w1", "carol"), fxIssue(), fxIssueState())
	in.Where = RepositoryKey{Server: "gitea-b", ID: 7}
	v, res := Validate(in)
	if res.Refused() {
		t.Fatalf("refused: %+v", res)
	}
	if v.RepositoryBinding != "gitea:gitea-b/7" {
		t.Errorf("the pin's repository_binding is %q", v.RepositoryBinding)
	}
	flags := fxValidateInput(fxWorker("w1", "carol"), fxIssue(), fxIssueState())
	vf, _ := Validate(flags)
	if vf.Pin == v.Pin {
		t.Error("the same binding in the flags' repository and in a GiteaRepository pins alike")
	}
}

func TestChooseSlot(t *testing.T) {
	cases := []struct {
		name  string
		slots []Slot
		limit int
		want  SlotChoice
	}{
		{name: "no slot yet", limit: 2, want: SlotChoice{Index: 0, Create: true}},
		{name: "the lowest free one", slots: []Slot{{0, "a"}, {1, ""}, {2, ""}}, limit: 3, want: SlotChoice{Index: 1}},
		{name: "a free one before a missing one", slots: []Slot{{1, ""}}, limit: 2, want: SlotChoice{Index: 0, Create: true}},
		{name: "the missing one after the held ones", slots: []Slot{{0, "a"}, {1, "b"}}, limit: 3, want: SlotChoice{Index: 2, Create: true}},
		{name: "the one it holds already", slots: []Slot{{0, "a"}, {1, "me"}}, limit: 2, want: SlotChoice{Held: true, Index: 1}},
		{name: "its own slot above a lowered limit", slots: []Slot{{0, "a"}, {3, "me"}}, limit: 1, want: SlotChoice{Held: true, Index: 3}},
		{name: "every slot held", slots: []Slot{{0, "a"}, {1, "b"}}, limit: 2, want: SlotChoice{Full: true}},
		{name: "a free slot above the limit is not taken", slots: []Slot{{0, "a"}, {1, ""}}, limit: 1, want: SlotChoice{Full: true}},
		{name: "held slots above a lowered limit do not count", slots: []Slot{{0, ""}, {1, "a"}, {2, "b"}}, limit: 1, want: SlotChoice{Index: 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseSlot(tc.slots, "me", tc.limit); got != tc.want {
				t.Fatalf("ChooseSlot = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSlotNames(t *testing.T) {
	a, b := RepositoryKey{Server: "gitea-a", ID: 7}, RepositoryKey{Server: "gitea-b", ID: 7}
	if SlotsOf(a) == SlotsOf(b) {
		t.Fatal("two repositories with one ID on two servers share their slots")
	}
	if SlotName(a, 0) == SlotName(a, 1) || !strings.HasPrefix(SlotName(a, 9999), SlotsOf(a)+"-") || len(SlotName(a, 9999)) > 63 {
		t.Fatalf("slot names %q, %q: not distinct, not under their prefix, or too long for a Lease", SlotName(a, 0), SlotName(a, 9999))
	}
	if LockName(a, Target{Repository: "x/y", Kind: KindIssue, Number: 1}) == SlotName(a, 1) {
		t.Fatal("a slot is named like a lock")
	}
}
