package claim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
)

// pinEncodingVersion heads the canonical encoding so that a future change of
// the encoding can never produce a colliding pin.
const pinEncodingVersion = "fleet-claim-pin/v1"

// PinComponents are the inputs a validation pins. Every one of them is
// re-read at claim time; a claim proceeds only if none moved.
type PinComponents struct {
	// Identity is the worker's Gitea identity.
	Identity string `json:"identity"`
	// Worker is the worker's registration name.
	Worker string `json:"worker"`
	// CapabilityVerdict is the authorization verdict for the worker.
	CapabilityVerdict string `json:"capabilityVerdict"`
	// RepositoryBinding is the repository the worker is bound to.
	RepositoryBinding string `json:"repositoryBinding"`
	// Target is the validated target.
	Target Target `json:"target"`
	// Role is the role derived from the target.
	Role Role `json:"role"`
	// ParityRevision is the base-branch head.
	ParityRevision string `json:"parityRevision"`
	// DependencyStates are the dependency edges as "owner/name#N=state",
	// sorted and de-duplicated.
	DependencyStates []string `json:"dependencyStates,omitempty"`
	// HeadSHA is the pull request head read from Gitea ("" for issues).
	HeadSHA string `json:"headSHA,omitempty"`
	// ClaimGeneration is the per-target Lease resourceVersion ("" if absent).
	ClaimGeneration string `json:"claimGeneration"`
	// RuleSetDigest is the digest of the rule set the validation ran under.
	RuleSetDigest string `json:"ruleSetDigest"`
}

// ComputePin returns "sha256:<hex>" over an unambiguous canonical encoding
// of the components. Identities, repositories and commit ids are compared
// without regard to case elsewhere, so they are lower-cased here;
// dependency order and duplicates do not matter.
func ComputePin(c PinComponents) string {
	sum := sha256.Sum256(canonicalPin(c))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalPin writes each field as name, byte length and value, in a fixed
// order, so no two distinct component sets share an encoding.
func canonicalPin(c PinComponents) []byte {
	var b bytes.Buffer
	b.WriteString(pinEncodingVersion)
	b.WriteByte('\n')
	field := func(name, value string) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(len(value)))
		b.WriteByte(':')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	field("identity", norm(c.Identity))
	field("worker", c.Worker)
	field("capability_verdict", c.CapabilityVerdict)
	field("repository_binding", norm(c.RepositoryBinding))
	field("target.repository", norm(c.Target.Repository))
	field("target.kind", string(c.Target.Kind))
	field("target.number", strconv.FormatInt(c.Target.Number, 10))
	field("target.head_sha", norm(c.Target.HeadSHA))
	field("role", string(c.Role))
	field("parity_revision", norm(c.ParityRevision))
	deps := canonicalStrings(c.DependencyStates)
	field("dependency_states.count", strconv.Itoa(len(deps)))
	for _, d := range deps {
		field("dependency_state", d)
	}
	field("head_sha", norm(c.HeadSHA))
	field("claim_generation", c.ClaimGeneration)
	field("rule_set_digest", c.RuleSetDigest)
	return b.Bytes()
}

// canonicalStrings returns a sorted, de-duplicated copy.
func canonicalStrings(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// DependencyStates renders dependency edges as sorted, de-duplicated
// "owner/name#N=state" strings. Repository and state are lower-cased; an
// empty state is rendered as "unknown".
func DependencyStates(edges []DependencyEdge) []string {
	out := make([]string, 0, len(edges))
	for _, e := range edges {
		state := norm(e.State)
		if state == "" {
			state = "unknown"
		}
		out = append(out, norm(e.Repository)+"#"+strconv.FormatInt(e.Number, 10)+"="+state)
	}
	if len(out) == 0 {
		return nil
	}
	return canonicalStrings(out)
}

// sameStrings compares two canonical string lists.
func sameStrings(a, b []string) bool {
	return slices.Equal(canonicalStrings(a), canonicalStrings(b))
}
