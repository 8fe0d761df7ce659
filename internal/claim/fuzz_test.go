package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func FuzzComputePin(f *testing.F) {
	f.Add("carol", "w1", "allowed", "fleet/app", uint8(1), int64(57), fxHead, fxParity, "fleet/app#3=closed", "fleet/app#9=closed", "200", "reviewer")
	f.Add("", "", "", "", uint8(0), int64(0), "", "", "", "", "", "")
	f.Add("a\n", "b=1:", "x", "y/z", uint8(2), int64(-1), "H", "P", "d", "d", "g", "merger")
	f.Fuzz(func(t *testing.T, identity, worker, verdict, repo string, kind uint8, number int64,
		head, parity, dep1, dep2, gen, role string) {
		kinds := []Kind{KindIssue, KindPullRequest, Kind("Other")}
		c := PinComponents{
			Identity: identity, Worker: worker, CapabilityVerdict: verdict, RepositoryBinding: repo,
			Target: Target{Repository: repo, Kind: kinds[int(kind)%len(kinds)], Number: number, HeadSHA: head},
			Role:   Role(role), ParityRevision: parity, DependencyStates: []string{dep1, dep2},
			HeadSHA: head, ClaimGeneration: gen, RuleSetDigest: RuleSetDigest(),
		}
		p := ComputePin(c)
		if !pinShape.MatchString(p) {
			t.Fatalf("pin %q badly shaped", p)
		}
		if ComputePin(c) != p {
			t.Fatal("not deterministic")
		}
		swapped := c
		swapped.DependencyStates = []string{dep2, dep1}
		if ComputePin(swapped) != p {
			t.Fatal("dependency order changed the pin")
		}
		if c.DependencyStates[0] != dep1 {
			t.Fatal("input mutated")
		}
		// Moving one byte across the boundary of two raw fields must move the pin.
		if len(worker) > 0 {
			moved := c
			moved.Worker, moved.CapabilityVerdict = worker[:len(worker)-1], worker[len(worker)-1:]+verdict
			if ComputePin(moved) == p {
				t.Fatalf("boundary between worker and verdict is ambiguous: %q|%q", worker, verdict)
			}
		}
		// The generation is pinned verbatim.
		bumped := c
		bumped.ClaimGeneration = gen + "1"
		if ComputePin(bumped) == p {
			t.Fatal("generation not covered")
		}
	})
}

func FuzzValidate(f *testing.F) {
	f.Add("open", uint8(0), false, false, false, "alice", "carol", "bob", int64(42), "", "", "closed", "", "", "", "", "100", true)
	f.Add("open", uint8(1), false, false, false, "alice", "carol", "bob", int64(57), fxHead, fxHead, "", "", "", "", "", "200", true)
	f.Add("open", uint8(1), false, true, true, "alice", "ALICE", "bob", int64(57), fxHead, fxHead, "", "", "", "", "", "200", true)
	f.Add("closed", uint8(1), true, true, true, "alice", "carol", "bob", int64(57), fxHead, fxHead, "", "", "", "", "", "", true)
	f.Add("open", uint8(1), false, false, false, "alice", "Bob", "bob", int64(57), fxHead, fxHead, "", "blocked", "carol", "rival", "active", "7", false)
	f.Fuzz(func(t *testing.T, state string, kindSel uint8, merged, reviewed, approved bool,
		author, identity, pusher string, number int64, reqHead, stateHead, depState, label, assignee,
		recWorker, recState, gen string, live bool) {
		kinds := []Kind{KindIssue, KindPullRequest, Kind("Epic")}
		kind := kinds[int(kindSel)%len(kinds)]
		requested := Target{Repository: fxRepo, Kind: kind, Number: number, HeadSHA: reqHead}
		st := TargetState{
			Target: Target{Repository: fxRepo, Kind: kind, Number: number, HeadSHA: stateHead},
			State:  state, Merged: merged, Author: author, Pushers: []string{pusher},
			Reviewed: reviewed, Approved: approved, ParityRevision: fxParity, LeaseGeneration: gen,
		}
		if depState != "" {
			st.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 1, State: depState}}
		}
		if label != "" {
			st.Labels = []string{label}
		}
		if assignee != "" {
			st.Assignees = []string{assignee}
		}
		if recWorker != "" {
			st.ClaimRecord = &Record{ClaimID: "c-" + recWorker, Worker: recWorker, Identity: recWorker,
				State: RecordState(recState), ExpiresAt: fxNow.Add(time.Hour)}
		}
		w := fxWorker("w1", identity)
		if !live {
			w.OwnershipState = fleet.Stale
		}
		in := fxValidateInput(w, requested, st)

		v1, r1 := Validate(in)
		v2, r2 := Validate(in)
		if !reflect.DeepEqual(v1, v2) || r1 != r2 {
			t.Fatal("Validate is not deterministic")
		}
		if r1.Target != requested || r1.RuleSetDigest != RuleSetDigest() || r1.RetryPermitted {
			t.Fatalf("result %+v", r1)
		}
		if r1.Refused() {
			rule, ok := ruleByPredicate(r1.FailedPredicate)
			if !ok || rule.ID != r1.RuleID || !slices.Contains(Classes(), r1.Class) || !r1.ReassessFromFreshState {
				t.Fatalf("refusal not from the rule set: %+v", r1)
			}
			if v1.Pin != "" {
				t.Fatal("refusal carries a pin")
			}
			return
		}
		if r1.Outcome != OutcomeValidated {
			t.Fatalf("outcome %q", r1.Outcome)
		}
		// Never validated for a closed or merged target.
		if strings.ToLower(strings.TrimSpace(state)) != StateOpen || merged {
			t.Fatalf("validated a terminal target: state %q merged %v", state, merged)
		}
		// Never validated against independence.
		if v1.Role != RoleAuthor && (sameIdentity(identity, author) || sameIdentity(identity, pusher)) {
			t.Fatalf("identity %q validated as %s on work by %q/%q", identity, v1.Role, author, pusher)
		}
		if v1.Role == RoleTerminal || v1.Role == RoleNone || v1.Pin != ComputePin(v1.PinComponents) {
			t.Fatalf("validation %+v", v1)
		}
		// Read-only re-read: claiming against identical state clears all clauses.
		acq, rc := DecideClaim(fxClaimInput(in, v1))
		if rc.Outcome != OutcomeValidated || acq.Validation.Pin != v1.Pin {
			t.Fatalf("claim against unchanged state refused: %+v", rc)
		}
	})
}

// FuzzIdentityKey: two identities the claim rules take for one (sameIdentity) always
// share an IdentityKey, so selecting claims by the key misses none of them. Seeded with
// the letters whose case-folding classes have more than two members.
func FuzzIdentityKey(f *testing.F) {
	for _, pair := range [][2]string{
		{"Alice", "alice"}, {"bob", "BOB"}, {" carol ", "Carol"}, {"\u212Aelvin", "kelvin"}, {"\u017Fam", "SAM"},
		{"\u03A3igma", "\u03C2igma"}, {"\u03C3", "\u03C2"}, {"\u0130", "i"}, {"dave", "eve"}, {"", " "},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if sameIdentity(a, b) && IdentityKey(a) != IdentityKey(b) {
			t.Fatalf("sameIdentity(%q, %q) but keys %q and %q", a, b, IdentityKey(a), IdentityKey(b))
		}
		if k := IdentityKey(a); IdentityKey(k) != k {
			t.Fatalf("IdentityKey(%q) = %q is not its own key (%q)", a, k, IdentityKey(k))
		}
	})
}

// TestIdentityKeyReadsAsLowerCase: for the logins Gitea allows the key is the login in
// lower case.
func TestIdentityKeyReadsAsLowerCase(t *testing.T) {
	for in, want := range map[string]string{"Worker-1": "worker-1", " ALICE.b_2 ": "alice.b_2", "bob": "bob"} {
		if got := IdentityKey(in); got != want {
			t.Fatalf("IdentityKey(%q) = %q, want %q", in, got, want)
		}
	}
}
