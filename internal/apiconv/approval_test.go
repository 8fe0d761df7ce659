package apiconv

import (
	"testing"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The binding is passed through untouched: the retirement package decides what it means.
func TestApprovalCarriesTheBinding(t *testing.T) {
	for _, binding := range []string{"", fleetv1alpha1.ApprovalBindingRegistry, fleetv1alpha1.ApprovalBindingCandidateSet} {
		a := Approval(&fleetv1alpha1.RetirementApproval{Binding: binding, CandidateFingerprint: "sha256:c",
			WorkerIdentities: []string{"w"}, ApprovedBy: "u"})
		if a.Binding != binding || a.CandidateFingerprint != "sha256:c" || a.RegistryFingerprint != "" || len(a.WorkerIdentities) != 1 {
			t.Fatalf("Approval(binding %q) = %+v", binding, a)
		}
	}
	if a := Approval(nil); a.EffectiveBinding() != retirement.BindingCandidateSet || a.Binding != "" {
		t.Fatalf("Approval(nil) = %+v", a)
	}
}
