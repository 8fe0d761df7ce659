package claim

import "errors"

// Role is the temporary role a task confers. It is derived from the target,
// never chosen by the worker, and lasts only as long as the capability.
type Role string

const (
	// RoleNone is the neutral state: no task role has been adopted.
	RoleNone Role = ""
	// RoleAuthor works an open issue: pushes a branch and opens a pull request.
	RoleAuthor Role = "author"
	// RoleReviewer gives the first review of an open pull request.
	RoleReviewer Role = "reviewer"
	// RoleApprover decides on approval of a reviewed pull request.
	RoleApprover Role = "approver"
	// RoleMerger merges an approved pull request.
	RoleMerger Role = "merger"
	// RoleTerminal marks a closed or merged target. No capability is ever
	// granted for it.
	RoleTerminal Role = "terminal"
)

// Operations a task capability may permit.
const (
	// OpPushBranch pushes commits to a work branch.
	OpPushBranch = "push_branch"
	// OpOpenPullRequest opens a pull request for the issue.
	OpOpenPullRequest = "open_pull_request"
	// OpComment comments on the target.
	OpComment = "comment"
	// OpReview submits a (non-approving) review.
	OpReview = "review"
	// OpApprove submits an approving review.
	OpApprove = "approve"
	// OpMerge merges the pull request.
	OpMerge = "merge"
)

// DeriveRole derives the temporary role from the target's kind and state
// alone. It never looks at the worker. Anything it cannot recognise as open
// is terminal, so doubt never yields a role.
func DeriveRole(st TargetState) Role {
	if norm(st.State) != StateOpen || st.Merged {
		return RoleTerminal
	}
	switch st.Target.Kind {
	case KindIssue:
		return RoleAuthor
	case KindPullRequest:
		switch {
		case st.Approved:
			return RoleMerger
		case st.Reviewed:
			return RoleApprover
		default:
			return RoleReviewer
		}
	default:
		return RoleTerminal
	}
}

// OperationsFor returns the operations a role permits, in a fixed order. The
// neutral and terminal roles permit none.
func OperationsFor(r Role) []string {
	switch r {
	case RoleAuthor:
		return []string{OpPushBranch, OpOpenPullRequest, OpComment}
	case RoleReviewer:
		return []string{OpReview, OpComment}
	case RoleApprover:
		return []string{OpApprove, OpComment}
	case RoleMerger:
		return []string{OpMerge, OpComment}
	default:
		return nil
	}
}

// CompletingOperation is the operation whose write is the role's own work, the one
// WorkDone recognises once Gitea holds it: the author's pull request, the reviewer's
// review, the approver's approval, the merger's merge. Other roles have none ("").
func CompletingOperation(r Role) string {
	switch r {
	case RoleAuthor:
		return OpOpenPullRequest
	case RoleReviewer:
		return OpReview
	case RoleApprover:
		return OpApprove
	case RoleMerger:
		return OpMerge
	default:
		return ""
	}
}

// Independence errors returned by CheckIndependence.
var (
	// ErrAuthorConflict: the identity opened the pull request.
	ErrAuthorConflict = errors.New("identity authored the target")
	// ErrPusherConflict: the identity authored, committed or pushed a commit of
	// the pull request.
	ErrPusherConflict = errors.New("identity pushed to the target")
	// ErrRoleConflict: the identity already reviewed or approved the pull
	// request, so it would hold a second of the reviewer, approver and merger
	// roles on it.
	ErrRoleConflict = errors.New("identity already took part in the review of the target")
	// ErrIndependenceUnprovable: the identity or the target's author is
	// unknown, so independence cannot be shown.
	ErrIndependenceUnprovable = errors.New("independence cannot be established")
	// ErrRoleNotGrantable: the role is neutral, terminal or unknown.
	ErrRoleNotGrantable = errors.New("role is not grantable")
)

// CheckIndependence enforces identity-level independence for a role on a
// target. The reviewer, approver and merger roles are refused to the identity
// that authored the target (ErrAuthorConflict), to every identity among its
// pushers (ErrPusherConflict: accounts that pushed, authored, committed or
// co-authored any commit), and to any identity that already submitted a review
// of the pull request, of any state, dismissed or stale (ErrRoleConflict): the
// reviewer, the approver and the merger of one pull request are three distinct
// identities. Identities compare without regard to case. Independence that
// cannot be shown fails closed (ErrIndependenceUnprovable): an unknown
// identity or author, any commit or co-author e-mail that maps to no account,
// or a push Gitea attributes to no account. The author role carries no such
// restriction: opening an issue does not bar its author from working it. The
// check is on identities, not registrations, so neither a derived role nor a
// second registration of the same identity can route around it.
func CheckIndependence(identity string, role Role, st TargetState) error {
	switch role {
	case RoleAuthor:
		return nil
	case RoleReviewer, RoleApprover, RoleMerger:
	default:
		return ErrRoleNotGrantable
	}
	if norm(identity) == "" || norm(st.Author) == "" || len(st.UnmappedCommitEmails) > 0 || st.UnattributedPushes > 0 {
		// Nobody can say who wrote commits whose e-mail maps to no account.
		return ErrIndependenceUnprovable
	}
	if sameIdentity(identity, st.Author) {
		return ErrAuthorConflict
	}
	if containsIdentity(st.Pushers, identity) {
		return ErrPusherConflict
	}
	for _, r := range st.Reviews {
		if sameIdentity(r.Reviewer, identity) {
			return ErrRoleConflict
		}
	}
	return nil
}
