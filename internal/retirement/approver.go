package retirement

import (
	"fmt"
	"strings"
	"time"
)

// Condition reasons of the approval that concern who approved and what guarded it.
const (
	// ConditionApprovalPolicyMissing: the admission policy that guards approvals (the
	// ValidatingAdmissionPolicy or its binding) is absent, or was not in place unchanged
	// since before the plan was created, so approvedBy and approvedGroups prove nothing.
	ConditionApprovalPolicyMissing = "ApprovalPolicyMissing"
	// ConditionApprovalPolicyAltered: the policy or its binding differs from the one the
	// controller ships.
	ConditionApprovalPolicyAltered = "ApprovalPolicyAltered"
	// ConditionApproverIsWorker: the approver is a worker's ServiceAccount.
	ConditionApproverIsWorker = "ApproverIsWorker"
)

// ReasonApprovalRevoked keeps the rows an apply did not reach because the approval
// stopped being honoured part-way (the approver lost the approve verb, or the guarding
// policy went missing or changed).
const ReasonApprovalRevoked = "approval_revoked"

// ApprovalGuardSettle is how long before a plan's creation the guarding policy and its
// binding must have been written last. The API server enforces a policy a moment after
// it is written, and timestamps have whole seconds, so a policy (re)written at about
// the time of the plan may not have seen its approval.
const ApprovalGuardSettle = 2 * time.Second

// ApprovalGuard is what the controller read of the admission policy that guards
// approvals and of its binding.
type ApprovalGuard struct {
	// PolicyFound and BindingFound say whether each object exists.
	PolicyFound, BindingFound bool
	// Differences says how the live objects differ from the shipped ones (empty: none).
	Differences []string
	// LastWritten is the latest creation or spec write of either object.
	LastWritten time.Time
}

// JudgeGuard says whether the guard vouches for an approval of a plan created at
// planCreated: both objects exist, equal the shipped ones, and have not been written
// since ApprovalGuardSettle before the plan was created (any approval comes at or after
// creation, so the policy admitted it). It returns "" or the refusing reason, with a
// message.
func JudgeGuard(g ApprovalGuard, planCreated time.Time) (reason, message string) {
	const name = "the fleet-retirementplan-approval admission policy"
	switch {
	case !g.PolicyFound || !g.BindingFound:
		missing := "ValidatingAdmissionPolicy"
		if g.PolicyFound {
			missing = "ValidatingAdmissionPolicyBinding"
		} else if !g.BindingFound {
			missing = "ValidatingAdmissionPolicy and its binding"
		}
		return ConditionApprovalPolicyMissing, fmt.Sprintf("%s is not installed (no %s), so approvedBy and approvedGroups are not proof of who approved; "+
			"install config/admission and create a new plan", name, missing)
	case len(g.Differences) > 0:
		return ConditionApprovalPolicyAltered, fmt.Sprintf("%s differs from the one the controller ships (%s), so approvedBy and approvedGroups are not proof of who approved; "+
			"restore config/admission and create a new plan", name, strings.Join(g.Differences, "; "))
	case planCreated.Truncate(time.Second).Sub(g.LastWritten.Truncate(time.Second)) < ApprovalGuardSettle:
		return ConditionApprovalPolicyMissing, fmt.Sprintf("%s was written at %s, not in place unchanged since before this plan was created (%s), "+
			"so it may not have checked this approval; create a new plan", name, g.LastWritten.UTC().Format(time.RFC3339), planCreated.UTC().Format(time.RFC3339))
	}
	return "", ""
}

// SubjectFacts is what the controller gathered about an approver to tell whether it is a
// worker.
type SubjectFacts struct {
	// User is approvedBy.
	User string
	// HasRegistration: a WorkerRegistration named like the ServiceAccount exists in the
	// ServiceAccount's namespace.
	HasRegistration bool
	// HoldsWorkerVerb: the subject holds the custom verb only the fleet-worker role grants.
	HoldsWorkerVerb bool
	// HoldsEveryVerb: the subject also holds a verb no role names, so its rights on
	// workerregistrations come from a wildcard (and its worker verb proves nothing).
	HoldsEveryVerb bool
}

// ServiceAccountOf splits a ServiceAccount user name (system:serviceaccount:NS:NAME).
func ServiceAccountOf(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

// IsWorker says whether the approver is a worker: a ServiceAccount that has a
// WorkerRegistration of its name in its namespace, or that holds the fleet-worker role
// (its custom verb, when not merely through a wildcard: a subject with every verb on
// workerregistrations can retire rows without any plan, so refusing it protects
// nothing). Users that are not ServiceAccounts are never workers. It explains a yes.
func IsWorker(f SubjectFacts) (bool, string) {
	ns, name, ok := ServiceAccountOf(f.User)
	switch {
	case !ok:
		return false, ""
	case f.HasRegistration:
		return true, fmt.Sprintf("%s is a worker: WorkerRegistration %s/%s belongs to it, and a worker may not approve retirements", f.User, ns, name)
	case f.HoldsWorkerVerb && !f.HoldsEveryVerb:
		return true, fmt.Sprintf("%s is a worker: it holds the fleet-worker role, and a worker may not approve retirements", f.User)
	}
	return false, ""
}

// ApprovalFacts is everything an approval verdict rests on.
type ApprovalFacts struct {
	// Mismatch is ApprovalMismatch's answer ("" when the approval repeats the plan).
	Mismatch string
	// Guard is the guarding policy as read now; PlanCreated is the plan's creation time.
	Guard       ApprovalGuard
	PlanCreated time.Time
	// Binding is the approval's effective binding, named when it is approved.
	Binding string
	// Subject is what was gathered about the approver.
	Subject SubjectFacts
	// Authorized is the SubjectAccessReview's answer for approvedBy with approvedGroups,
	// and AuthorizerWhy its reason when it is no.
	Authorized    bool
	AuthorizerWhy string
}

// JudgeApproval decides the Approved condition. In order: a mismatch (final); a guard
// that does not vouch for the approval (final: restoring the policy cannot prove what
// it did not see); a worker as approver (final); an approver without the approve verb
// (not final: an operator may bind the role later).
func JudgeApproval(f ApprovalFacts) ApprovalVerdict {
	if f.Mismatch != "" {
		return ApprovalVerdict{Final: true, Reason: ConditionApprovalMismatch, Message: f.Mismatch}
	}
	if reason, msg := JudgeGuard(f.Guard, f.PlanCreated); reason != "" {
		return ApprovalVerdict{Final: true, Reason: reason, Message: msg}
	}
	if worker, why := IsWorker(f.Subject); worker {
		return ApprovalVerdict{Final: true, Reason: ConditionApproverIsWorker, Message: why}
	}
	if !f.Authorized {
		return ApprovalVerdict{Reason: ConditionApproverNotAuthorized, Message: f.AuthorizerWhy}
	}
	msg := "The approval matches the plan and the approver holds the approve verb"
	if f.Binding != "" {
		msg = fmt.Sprintf("The approval matches the plan (binding %s) and the approver holds the approve verb", f.Binding)
	}
	return ApprovalVerdict{Approved: true, Reason: ConditionApprovalMatches, Message: msg}
}

// ApprovalEventDue says whether a verdict deserves a Warning event: a refusal whose
// reason differs from the one the plan showed before (previous, "" for none). A recheck
// that finds the same refusal stays quiet.
func ApprovalEventDue(previous string, v ApprovalVerdict) bool {
	return !v.Approved && v.Reason != previous
}

// Backoff is how an approver that is not authorized yet is looked at again: Initial
// after the first refusal, doubling with each further one, never more than Max.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultApproverBackoff is the controller's backoff for ApproverNotAuthorized.
var DefaultApproverBackoff = Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute}

// After is the wait after the n-th consecutive refusal (n >= 1).
func (b Backoff) After(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Recheck is how often a long apply checks the approval again: before the first write,
// then whenever Rows rows were written or Interval passed since the last check,
// whichever comes first. Zero fields disable that trigger.
type Recheck struct {
	Rows     int
	Interval time.Duration
}

// DefaultApproverRecheck is the controller's cadence: every 100 rows or 10 seconds.
var DefaultApproverRecheck = Recheck{Rows: 100, Interval: 10 * time.Second}

// Due says whether the approval must be checked again before the next write, rows
// writes and elapsed time after the last check.
func (c Recheck) Due(rows int, elapsed time.Duration) bool {
	return (c.Rows > 0 && rows >= c.Rows) || (c.Interval > 0 && elapsed >= c.Interval)
}

// HostIdentities narrows an approval of a fleet plan to one host plan: the approved
// identities that are that host plan's candidates, sorted.
func HostIdentities(approved, hostCandidates []string) []string {
	mine := map[string]bool{}
	for _, id := range hostCandidates {
		mine[id] = true
	}
	var out []string
	for _, id := range NormalizeIdentities(approved) {
		if mine[id] {
			out = append(out, id)
		}
	}
	return out
}
