package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"time"
)

// Fixture values. Numbers and names that must never leak into a refusal are
// chosen so that they are easy to search for in marshalled results.
const (
	fxRepo        = "fleet/app"
	fxClaimID     = "claim-uid-self"
	fxParity      = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
	fxHead        = "c0ffee0c0ffee0c0ffee0c0ffee0c0ffee0c0ffe"
	fxOtherHead   = "deadbeefdeadbeefdeadbeefdeadbeefdeadbeef"
	fxIssueNumber = 42
	fxPRNumber    = 57
)

var fxNow = time.Date(2026, 7, 31, 15, 0, 0, 0, time.UTC)

func fxWorker(name, identity string) Worker {
	return Worker{Name: name, Identity: identity, Repository: fxRepo, Phase: fleet.Active, OwnershipState: fleet.Live}
}

func fxIssue() Target { return Target{Repository: fxRepo, Kind: KindIssue, Number: fxIssueNumber} }

func fxPR() Target {
	return Target{Repository: fxRepo, Kind: KindPullRequest, Number: fxPRNumber, HeadSHA: fxHead}
}

// fxIssueState is an open, unclaimed issue with one closed dependency.
func fxIssueState() TargetState {
	return TargetState{
		Target:          fxIssue(),
		State:           StateOpen,
		Author:          "alice",
		ParityRevision:  fxParity,
		Dependencies:    []DependencyEdge{{Repository: fxRepo, Number: 7, State: StateClosed}},
		LeaseGeneration: "100",
	}
}

// fxPRState is an open pull request by "alice", pushed to by "alice" and
// "bob", awaiting its first review.
func fxPRState() TargetState {
	return TargetState{
		Target:          fxPR(),
		State:           StateOpen,
		Author:          "alice",
		Pushers:         []string{"alice", "bob"},
		ParityRevision:  fxParity,
		LeaseGeneration: "200",
	}
}

func fxValidateInput(w Worker, requested Target, st TargetState) ValidateInput {
	return ValidateInput{
		Worker:               w,
		ClaimID:              fxClaimID,
		Requested:            requested,
		State:                st,
		ControllerRepository: fxRepo,
		CapabilityVerdict:    VerdictAllowed,
		Now:                  fxNow,
	}
}

// fxClaimInput builds a claim input that repeats a successful validation
// against unchanged state: the baseline every clause test mutates.
func fxClaimInput(vin ValidateInput, v Validation) ClaimInput {
	return ClaimInput{
		Worker:               vin.Worker,
		ClaimID:              vin.ClaimID,
		Spec:                 vin.Requested,
		PinnedValue:          v.Pin,
		Validated:            v,
		Fresh:                vin.State,
		ControllerRepository: vin.ControllerRepository,
		CapabilityVerdict:    vin.CapabilityVerdict,
		Now:                  vin.Now.Add(time.Minute),
	}
}

// mustValidate validates or fails the test.
func mustValidate(t interface {
	Helper()
	Fatalf(string, ...any)
}, in ValidateInput) Validation {
	t.Helper()
	v, r := Validate(in)
	if r.Outcome != OutcomeValidated {
		t.Fatalf("validation refused: %+v", r)
	}
	return v
}

// fxCapability activates a capability for in through the real protocol.
func fxCapability(t interface {
	Helper()
	Fatalf(string, ...any)
}, in ValidateInput) Capability {
	t.Helper()
	v := mustValidate(t, in)
	acq, r := DecideClaim(fxClaimInput(in, v))
	if r.Outcome != OutcomeValidated {
		t.Fatalf("claim refused: %+v", r)
	}
	c, r := Activate(ActivateInput{
		Validation:      acq.Validation,
		ClaimID:         in.ClaimID,
		LeaseName:       "lease-target",
		LeaseGeneration: "301",
		LeaseHolder:     in.ClaimID,
		Record:          fxOwnRecord(in),
		Now:             in.Now,
	})
	if c == nil || r.Outcome != OutcomeAcquired {
		t.Fatalf("activation refused: %+v", r)
	}
	return *c
}

func fxOwnRecord(in ValidateInput) *Record {
	return &Record{
		ClaimID:   in.ClaimID,
		Worker:    in.Worker.Name,
		Identity:  in.Worker.Identity,
		ExpiresAt: in.Now.Add(time.Hour),
		State:     RecordStateActive,
	}
}

// fxActiveState is the state after the claim in fxCapability won: our Lease
// at generation 301 and our record in force.
func fxActiveState(in ValidateInput) TargetState {
	st := in.State
	st.LeaseGeneration = "301"
	st.LeaseHolder = in.ClaimID
	st.ClaimRecord = fxOwnRecord(in)
	return st
}
