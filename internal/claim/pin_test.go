package claim

import (
	"regexp"
	"testing"
	"time"
)

var pinShape = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func basePin() PinComponents {
	return PinComponents{
		Identity:          "carol",
		Worker:            "w1",
		CapabilityVerdict: VerdictAllowed,
		RepositoryBinding: fxRepo,
		Target:            fxPR(),
		Role:              RoleReviewer,
		ParityRevision:    fxParity,
		DependencyStates:  []string{"fleet/app#3=closed", "fleet/app#9=closed"},
		HeadSHA:           fxHead,
		ClaimGeneration:   "200",
		RuleSetDigest:     RuleSetDigest(),
	}
}

func TestComputePinDeterministicAndShaped(t *testing.T) {
	p := ComputePin(basePin())
	if !pinShape.MatchString(p) {
		t.Fatalf("pin %q has the wrong shape", p)
	}
	for range 10 {
		if ComputePin(basePin()) != p {
			t.Fatal("pin is not deterministic")
		}
	}
}

func TestComputePinIgnoresDependencyOrderAndCase(t *testing.T) {
	want := ComputePin(basePin())
	tests := map[string]func(*PinComponents){
		"dependencies reversed":   func(c *PinComponents) { c.DependencyStates = []string{"fleet/app#9=closed", "fleet/app#3=closed"} },
		"dependencies duplicated": func(c *PinComponents) { c.DependencyStates = append(c.DependencyStates, "fleet/app#3=closed") },
		"identity case":           func(c *PinComponents) { c.Identity = "Carol" },
		"repository case":         func(c *PinComponents) { c.RepositoryBinding, c.Target.Repository = "Fleet/App", "FLEET/app" },
		"sha case": func(c *PinComponents) {
			c.HeadSHA, c.Target.HeadSHA, c.ParityRevision = "C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFE", "C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFE", "B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0"
		},
	}
	for name, mut := range tests {
		c := basePin()
		mut(&c)
		if got := ComputePin(c); got != want {
			t.Errorf("%s changed the pin", name)
		}
	}
	// The caller's slice is not reordered.
	c := basePin()
	c.DependencyStates = []string{"b", "a"}
	ComputePin(c)
	if c.DependencyStates[0] != "b" {
		t.Fatal("ComputePin mutated its input")
	}
}

// TestComputePinCoversEveryComponent: moving any single component moves the pin.
func TestComputePinCoversEveryComponent(t *testing.T) {
	base := ComputePin(basePin())
	muts := map[string]func(*PinComponents){
		"identity":          func(c *PinComponents) { c.Identity = "dave" },
		"worker":            func(c *PinComponents) { c.Worker = "w2" },
		"verdict":           func(c *PinComponents) { c.CapabilityVerdict = "denied" },
		"binding":           func(c *PinComponents) { c.RepositoryBinding = "fleet/ops" },
		"target repository": func(c *PinComponents) { c.Target.Repository = "fleet/ops" },
		"target kind":       func(c *PinComponents) { c.Target.Kind = KindIssue },
		"target number":     func(c *PinComponents) { c.Target.Number++ },
		"target head":       func(c *PinComponents) { c.Target.HeadSHA = fxOtherHead },
		"role":              func(c *PinComponents) { c.Role = RoleApprover },
		"parity":            func(c *PinComponents) { c.ParityRevision = "abc1234" },
		"dependency added":  func(c *PinComponents) { c.DependencyStates = append(c.DependencyStates, "fleet/app#11=closed") },
		"dependency state":  func(c *PinComponents) { c.DependencyStates[0] = "fleet/app#3=open" },
		"dependencies gone": func(c *PinComponents) { c.DependencyStates = nil },
		"head":              func(c *PinComponents) { c.HeadSHA = fxOtherHead },
		"generation":        func(c *PinComponents) { c.ClaimGeneration = "201" },
		"generation absent": func(c *PinComponents) { c.ClaimGeneration = "" },
		"rule set":          func(c *PinComponents) { c.RuleSetDigest = "sha256:00" },
	}
	seen := map[string]string{base: "base"}
	for name, mut := range muts {
		c := basePin()
		c.DependencyStates = append([]string(nil), c.DependencyStates...)
		mut(&c)
		p := ComputePin(c)
		if prev, dup := seen[p]; dup {
			t.Errorf("%s gives the same pin as %s", name, prev)
		}
		seen[p] = name
	}
}

// TestComputePinUnambiguous: values that would concatenate to the same text
// under a naive encoding still pin differently.
func TestComputePinUnambiguous(t *testing.T) {
	a, b := basePin(), basePin()
	a.Worker, a.CapabilityVerdict = "w1a", "llowed"
	b.Worker, b.CapabilityVerdict = "w1", "allowed"
	if ComputePin(a) == ComputePin(b) {
		t.Fatal("field boundary is ambiguous")
	}
	c, d := basePin(), basePin()
	c.DependencyStates = []string{"x\ndependency_state=1:y"}
	d.DependencyStates = []string{"x", "y"}
	if ComputePin(c) == ComputePin(d) {
		t.Fatal("list boundary is ambiguous")
	}
}

func TestDependencyStates(t *testing.T) {
	got := DependencyStates([]DependencyEdge{
		{Repository: "Other/Lib", Number: 12, State: "OPEN"},
		{Repository: fxRepo, Number: 2, State: ""},
		{Repository: fxRepo, Number: 2, State: ""},
		{Repository: fxRepo, Number: 10, State: StateClosed},
	})
	want := []string{"fleet/app#10=closed", "fleet/app#2=unknown", "other/lib#12=open"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if DependencyStates(nil) != nil {
		t.Fatal("no edges should render as nil")
	}
}

// TestReadOnlyInterleaving: reading the same state again, at another time,
// with lists in another order, yields the identical pin, and read-only calls
// between validation and claim do not invalidate the claim.
func TestReadOnlyInterleaving(t *testing.T) {
	in := issueIn()
	in.State.Dependencies = []DependencyEdge{
		{Repository: fxRepo, Number: 3, State: StateClosed},
		{Repository: fxRepo, Number: 9, State: StateClosed},
	}
	first := mustValidate(t, in)

	again := in
	again.Now = in.Now.Add(17 * time.Minute)
	again.State.Dependencies = []DependencyEdge{in.State.Dependencies[1], in.State.Dependencies[0]}
	again.State.Labels = nil
	second := mustValidate(t, again)
	if first.Pin != second.Pin {
		t.Fatal("re-reading identical state changed the pin")
	}

	// Several read-only validations by this worker and another between
	// validation and claim change nothing that is pinned.
	for i := range 5 {
		mustValidate(t, in)
		other := in
		other.Worker = fxWorker("w9", "erin")
		other.ClaimID = "claim-uid-other"
		mustValidate(t, other)
		_ = DeriveRole(in.State)
		_ = i
	}
	cin := fxClaimInput(in, first)
	cin.Now = in.Now.Add(30 * time.Minute)
	if _, r := DecideClaim(cin); r.Outcome != OutcomeValidated {
		t.Fatalf("claim after read-only calls refused: %+v", r)
	}
}
