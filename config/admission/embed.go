// Package admission carries the shipped admission manifests into the binary, so the
// controller can tell whether the policy that guards approvals is installed unaltered.
package admission

import _ "embed"

// RetirementPlanApproval is retirementplan_approval.yaml: the
// fleet-retirementplan-approval ValidatingAdmissionPolicy and its binding.
//
//go:embed retirementplan_approval.yaml
var RetirementPlanApproval []byte
