package claim

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Gateway refusal reasons beyond the Authorize reasons.
const (
	// ReasonIndependence: the caller's identity authored, pushed to or already reviewed the
	// pull request, so it may not review, approve or merge it.
	ReasonIndependence = "independence"
	// ReasonWrongBranch: a push or pull request names a branch other than the claim's work
	// branch (the default branch is never one).
	ReasonWrongBranch = "wrong_branch"
	// ReasonMissingReference: a pull request does not reference the claimed issue.
	ReasonMissingReference = "missing_reference"
	// ReasonRouteNotPermitted: the request matches no route the gateway forwards.
	ReasonRouteNotPermitted = "route_not_permitted"
	// ReasonMalformedRequest: the request body cannot be read as the route requires.
	ReasonMalformedRequest = "malformed_request"
	// ReasonNotRegistered: the caller has no active WorkerRegistration.
	ReasonNotRegistered = "not_registered"
	// ReasonStateUnavailable: the authoritative state could not be read; the gateway fails
	// closed.
	ReasonStateUnavailable = "state_unavailable"
	// ReasonFieldNotPermitted: the body sets a field the operation does not need and the
	// gateway does not forward (labels, assignees, reviewers or a milestone on a new pull
	// request, a scheduled or forced merge, a manual merge).
	ReasonFieldNotPermitted = "field_not_permitted"
	// ReasonReservedMarker: the text carries the marker of a claim record or audit block,
	// which only the controller writes.
	ReasonReservedMarker = "reserved_marker"
	// ReasonCommentBudget: the capability's comments used up their budget.
	ReasonCommentBudget = "comment_budget_exhausted"
	// ReasonUncoveredReference: a text (a comment, review, pull request, merge message or
	// pushed commit message) references an issue or pull request the capability does not
	// cover, which Gitea would write to on its own (a timeline entry, a close or reopen,
	// tracked time).
	ReasonUncoveredReference = "uncovered_reference"
	// ReasonProtectedPath: a push or pull request changes the fleet's own files (.fleet/),
	// which only the operators change.
	ReasonProtectedPath = "protected_path"
	// ReasonUnreadablePack: a push's pack cannot be read on its own (a thin pack, or a
	// malformed one), so what it carries cannot be checked.
	ReasonUnreadablePack = "unreadable_pack"
	// ReasonRepositoryNotReady: the GiteaRepository that serves the caller's bound
	// repository in its namespace is not fit for claims now (not Ready, not resolved, two
	// of them name it, or the rule set in force is not there), so no server is guessed.
	ReasonRepositoryNotReady = "repository_not_ready"
)

// Refusals of what no role may do, whoever asks and whatever they claimed: each has its
// own reason, whose message says what does work instead. A role's operation that another
// role holds is operation_not_permitted, whose message names that role.
const (
	// ReasonEditIssueNotPermitted: the request edits an issue or pull request (OpEditIssue:
	// its title, body, state, assignees, milestone or due date), closing or reopening it
	// among others.
	ReasonEditIssueNotPermitted = "edit_issue_not_permitted"
	// ReasonLabelNotPermitted: the request adds or removes labels (OpLabel).
	ReasonLabelNotPermitted = "label_not_permitted"
	// ReasonAssignNotPermitted: the request changes assignees (OpAssign).
	ReasonAssignNotPermitted = "assign_not_permitted"
	// ReasonReviewEventNotPermitted: a review's event is none a role submits (a pending
	// draft, an unknown or differently spelt event).
	ReasonReviewEventNotPermitted = "review_event_not_permitted"
)

// noRoleReasons maps each operation of the route table that no role holds to its refusal.
var noRoleReasons = map[string]string{
	OpEditIssue: ReasonEditIssueNotPermitted,
	OpLabel:     ReasonLabelNotPermitted,
	OpAssign:    ReasonAssignNotPermitted,
}

// WorkBranch is the only branch a claim's author may push to and open a pull request
// from: derived from the claim's namespace and name, so two claims never share one, and
// never the default branch.
func WorkBranch(namespace, claimName string) string {
	return "fleet/" + namespace + "/" + claimName
}

// WorkRef is WorkBranch as a full git ref.
func WorkRef(namespace, claimName string) string {
	return "refs/heads/" + WorkBranch(namespace, claimName)
}

// RefUpdate is one command of a git push: old and new object ids and the ref.
type RefUpdate struct {
	Old, New, Ref string
}

// Deletes reports whether the update deletes its ref.
func (u RefUpdate) Deletes() bool { return strings.Trim(u.New, "0") == "" }

// HeldClaim is one of the caller's claims as the gateway read it from the API server.
type HeldClaim struct {
	// Namespace and Name identify the TaskClaim.
	Namespace, Name string
	// Worker is spec.worker.
	Worker string
	// Phase is status.phase.
	Phase string
	// Capability is status.capability (nil when none).
	Capability *Capability
	// Where is the repository its validation resolved (status.repository): a capability
	// acts only in that repository, on that server.
	Where RepositoryKey
}

// Write is one mutation as the gateway read it, with the facts the decision needs.
type Write struct {
	// Route is the matched route (a mutation).
	Route Route
	// Event is a review's "event".
	Event string
	// CommitID is a review's "commit_id" or a merge's "head_commit_id".
	CommitID string
	// PullHead and PullText are a new pull request's head branch and its title and body;
	// PullBase is its base branch.
	PullHead, PullBase, PullText string
	// Text is every text the body carries (comment, review, pull request and merge texts).
	Text []string
	// Forbidden names the fields the body sets that the route's rule does not forward.
	Forbidden []string
	// Refs are a push's ref updates.
	Refs []RefUpdate
	// Branch and NewBranch are a contents API commit's "branch" (the branch it starts
	// from; the default branch when empty) and "new_branch" (the branch it writes, when
	// not Branch).
	Branch, NewBranch string
	// Commits are the messages of the commits a push (or a contents API commit) carries.
	Commits []string
	// ChangedPaths are the paths a push, pull request or contents API commit changes, as
	// far as the gateway needs to know them: every path under ProtectedDir it touches (a
	// push names the directory itself; a contents API commit names every path it writes,
	// moves or deletes).
	ChangedPaths []string
}

// WriteInput is everything AuthorizeWrite decides on.
type WriteInput struct {
	// Worker is the authenticated caller's registration name; Identity its Gitea login.
	Worker, Identity string
	// Repository is the canonical "owner/name" of the repository the request was routed
	// to, and Where its key (the zero key for the flags' repository).
	Repository string
	Where      RepositoryKey
	// DefaultBranch is the repository's default branch ("" = unknown: pushes are refused).
	DefaultBranch string
	// Claims are the caller's claims, read straight from the API server.
	Claims []HeldClaim
	// Write is the mutation.
	Write Write
	// LiveHead is the pull request's head as Gitea reports it now (pull request targets).
	LiveHead string
	// Target is the state of the bound pull request read now, for the independence
	// re-check of review, approve and merge (nil when not read: refused).
	Target *TargetState
	// TargetText is the bound pull request's title and body as read now: the issues it
	// names are covered by a capability on it too (pull request targets).
	TargetText string
	// PullCommits are the messages of the bound pull request's commits as read now, for a
	// merge: a merge carries them onto the default branch, where Gitea acts on them.
	PullCommits []string
	// PullFiles are the paths the bound pull request changes as read now, for a merge.
	PullFiles []string
	// Now is the time of the write.
	Now time.Time
}

// WriteVerdict is the gateway's answer for one mutation.
type WriteVerdict struct {
	// Allowed is true when the mutation may be forwarded.
	Allowed bool
	// Operation is the resolved operation (review or approve for a review).
	Operation string
	// Reason names the refusal ("" when allowed).
	Reason string
	// Message explains the refusal without naming any other task.
	Message string
	// Claim is the caller's claim the verdict is about ("" when none).
	Claim string
	// FillHead is set when an allowed review or merge named no commit: the head the
	// capability is bound to, which the gateway writes into the request (commit_id,
	// head_commit_id) before forwarding it. Gitea would take the head at the moment it
	// handles the request, which may have moved since this decision.
	FillHead string `json:",omitempty"`
}

var refusalMessages = map[string]string{
	ReasonNoCapability:          "you hold no active task capability; claim a task first",
	ReasonRevoked:               "your capability was revoked",
	ReasonExpired:               "your capability has expired",
	ReasonWrongWorker:           "the capability belongs to another worker",
	ReasonWrongRepository:       "the gateway serves only the repository your registration is bound to",
	ReasonRepositoryNotReady:    "the GiteaRepository of your bound repository is not ready; try again later",
	ReasonWrongTarget:           "your capability does not cover this issue or pull request",
	ReasonWrongHead:             "the commit named is not the head your capability is bound to, or the pull request's head moved",
	ReasonOperationNotPermitted: "your role does not permit this operation",
	ReasonIndependence:          "your identity authored, pushed to or already reviewed this pull request",
	ReasonWrongBranch:           "you may push to and open pull requests from your claim's work branch only",
	ReasonMissingReference:      "the pull request must reference the claimed issue as #N in its title or body",
	ReasonRouteNotPermitted:     "the gateway does not forward this request",
	ReasonMalformedRequest:      "the request body cannot be read as this route requires",
	ReasonNotRegistered:         "you have no active worker registration",
	ReasonStateUnavailable:      "the authoritative state could not be read; try again",
	ReasonFieldNotPermitted:     "the request sets a field the gateway does not forward",
	ReasonReservedMarker:        "the text carries a fleet claim marker, which only the controller writes",
	ReasonCommentBudget:         "your capability has used up its comment budget",
	ReasonUncoveredReference: "the text references an issue or pull request your capability does not cover " +
		"(#N, !N, owner/repo#N or an issue link): Gitea would write to it on its own; name only your claimed item, " +
		"and for a pull request the issues it fixes",
	ReasonProtectedPath:  "the change touches .fleet/, the fleet's own files, which only operators change",
	ReasonUnreadablePack: "the pushed pack cannot be read on its own (a thin or malformed pack); push again without --thin",
	ReasonEditIssueNotPermitted: "no role may edit an issue or pull request directly, nor close or reopen it " +
		"(its body holds the claim record): merging the pull request closes it, and a pull request that says " +
		"\"Fixes #N\" closes issue N when it is merged; say anything else in a comment on your claimed item",
	ReasonLabelNotPermitted: "no role may add or remove labels: people set them (the blocked label decides " +
		"whether an item may be claimed); ask for a change in a comment on your claimed item",
	ReasonAssignNotPermitted: "no role may change assignees: the controller assigns an item to whoever holds its claim; " +
		"kubectl fleet claim takes an item and kubectl fleet release gives it back",
	ReasonReviewEventNotPermitted: "no role may leave a pending (draft) review or one of another event: send the whole " +
		"review in one request with the event COMMENT or REQUEST_CHANGES (the reviewer's) or APPROVED (the approver's), " +
		"spelt exactly so",
}

// operationPhrases say what an operation does, for the message of a role that does not
// hold it.
var operationPhrases = map[string]string{
	OpPushBranch:      "pushing to a work branch",
	OpOpenPullRequest: "opening a pull request",
	OpComment:         "commenting",
	OpReview:          "reviewing a pull request (COMMENT or REQUEST_CHANGES)",
	OpApprove:         "approving a pull request",
	OpMerge:           "merging a pull request",
}

// grantableRoles are the roles a claim confers, in the order an item passes through them.
var grantableRoles = []Role{RoleAuthor, RoleReviewer, RoleApprover, RoleMerger}

// operationMessage is the message of operation_not_permitted for op under a claim whose
// role is have: which role holds op instead, and where a claim's role comes from. It is
// "" when that cannot be said (an unknown operation, one no role or have itself holds),
// and the fixed message applies.
func operationMessage(op string, have Role) string {
	phrase, ok := operationPhrases[op]
	if !ok || slices.Contains(OperationsFor(have), op) {
		return ""
	}
	var holders []string
	for _, r := range grantableRoles {
		if slices.Contains(OperationsFor(r), op) {
			holders = append(holders, "the "+string(r)+"'s")
		}
	}
	if len(holders) == 0 {
		return ""
	}
	m := phrase + " is " + strings.Join(holders, " or ") + " operation"
	if slices.Contains(grantableRoles, have) {
		m += ", not the " + string(have) + "'s, the role your claim gives you"
	}
	return m + "; a claim's role comes from its item's state when it is claimed (an open issue: author; " +
		"an open pull request: reviewer, then approver once it has a review, then merger once it is approved)"
}

// RefusalMessage is the fixed message of a refusal reason.
func RefusalMessage(reason string) string {
	if m, ok := refusalMessages[reason]; ok {
		return m
	}
	return "refused"
}

func refuse(op, reason, claimName string) WriteVerdict {
	return WriteVerdict{Operation: op, Reason: reason, Message: RefusalMessage(reason), Claim: claimName}
}

// refuseUnder refuses op under the caller's claim h: as refuse, and when h's role does
// not hold op, the message names the role that does.
func refuseUnder(op, reason string, h HeldClaim) WriteVerdict {
	v := refuse(op, reason, h.Name)
	if reason == ReasonOperationNotPermitted && h.Capability != nil {
		v.Message = cmp.Or(operationMessage(op, h.Capability.Role), v.Message)
	}
	return v
}

// AuthorizeWrite decides one mutation at the moment of the write. It resolves the
// operation (a review's event), picks the caller's claim the write is about (by number, or
// by work branch for pushes and new pull requests), and runs Authorize on it: expiry,
// revocation, worker, repository, target, head and operation. Only claims decided in
// the repository the request was routed to count: a capability in a same-named
// repository of another server permits nothing here. Review, approve and merge
// name the bound head in their body and Gitea must still report it as the head; they are
// also re-checked for independence against the pull request as read now. Claims of other
// workers are never considered and no message names another task.
func AuthorizeWrite(in WriteInput) WriteVerdict {
	w := in.Write
	op, refused := checkWriteShape(in)
	if refused != nil {
		return *refused
	}
	active := make([]HeldClaim, 0, len(in.Claims))
	for _, h := range in.Claims {
		if h.Worker == in.Worker && h.Phase == PhaseActive && h.Capability != nil && h.Where == in.Where {
			active = append(active, h)
		}
	}
	if len(active) == 0 {
		return refuse(op, ReasonNoCapability, "")
	}
	switch w.Route.Body {
	case BodyOpenPull:
		return authorizeByBranch(in, active, op, []string{"refs/heads/" + strings.TrimPrefix(w.PullHead, "refs/heads/")})
	case BodyReceivePack:
		refs := make([]string, 0, len(w.Refs))
		for _, u := range w.Refs {
			if u.Deletes() {
				return refuseBranch(op, active, "a push that deletes a branch is not forwarded, not even your work branch's")
			}
			refs = append(refs, u.Ref)
		}
		return authorizeByBranch(in, active, op, refs)
	case BodyContents:
		// Gitea writes new_branch, or branch when new_branch is empty, or the default
		// branch when both are.
		branch := cmp.Or(w.NewBranch, w.Branch)
		if branch == "" {
			return refuseBranch(op, active, "a commit through the contents API must name your work branch as its branch or new_branch")
		}
		return authorizeByBranch(in, active, op, []string{"refs/heads/" + branch})
	}
	var last WriteVerdict
	for _, h := range active {
		v, final := authorizeItem(in, op, h)
		if final {
			return v
		}
		last = v
	}
	return last
}

// authorizeItem decides a write on one issue or pull request under one of the caller's
// active claims. ok is false when the claim does not permit it (the verdict says why); a
// permitted write whose texts are refused is final (ok true, not allowed).
func authorizeItem(in WriteInput, op string, h HeldClaim) (v WriteVerdict, ok bool) {
	w, c := in.Write, h.Capability
	t := Target{Repository: w.Route.Repository, Kind: w.Route.Kind, Number: w.Route.Number}
	if t.Kind == "" && t.Number == c.Target.Number {
		t.Kind = c.Target.Kind // one number sequence: the same number is the same item
	}
	if t.Kind == "" {
		t.Kind = KindIssue
	}
	atHead := w.Route.Body == BodyReview || w.Route.Body == BodyMerge
	if t.Kind == KindPullRequest {
		t.HeadSHA = in.LiveHead
		if atHead {
			// A review or merge naming no commit is made at the bound head (FillHead).
			t.HeadSHA = cmp.Or(w.CommitID, c.Target.HeadSHA)
		}
	}
	permitted, reason := Authorize(c, false, Query{Worker: in.Worker, Repository: w.Route.Repository, Target: t, Operation: op, Now: in.Now})
	if permitted && t.Kind == KindPullRequest && !sameSHA(in.LiveHead, c.Target.HeadSHA) {
		permitted, reason = false, ReasonWrongHead
	}
	if permitted && (op == OpReview || op == OpApprove || op == OpMerge) {
		if in.Target == nil || !in.Target.Target.SameItem(Target{Repository: c.Repository, Kind: c.Target.Kind, Number: c.Target.Number}) ||
			CheckIndependence(in.Identity, c.Role, *in.Target) != nil {
			permitted, reason = false, ReasonIndependence
		}
	}
	if !permitted {
		return refuseUnder(op, reason, h), false
	}
	if reason := checkTexts(in, c); reason != "" {
		return refuse(op, reason, h.Name), true
	}
	v = WriteVerdict{Allowed: true, Operation: op, Claim: h.Name}
	if atHead && w.CommitID == "" {
		v.FillHead = c.Target.HeadSHA
	}
	return v, true
}

// checkWriteShape resolves the operation (a review's event) and refuses, before any claim
// is looked at, what no claim could permit: an unknown review event, another repository,
// an operation no role holds, a field the gateway does not forward, a text carrying a
// controller marker.
func checkWriteShape(in WriteInput) (string, *WriteVerdict) {
	w := in.Write
	op := w.Route.Operation
	fail := func(op, reason string) (string, *WriteVerdict) {
		v := refuse(op, reason, "")
		return op, &v
	}
	if w.Route.Body == BodyReview {
		var ok bool
		if op, ok = ReviewOperation(w.Event); !ok {
			return fail(OpReview, ReasonReviewEventNotPermitted)
		}
	}
	switch {
	case (w.Route.Body == BodyReview || w.Route.Body == BodyMerge) && w.CommitID != "" && !IsObjectID(w.CommitID):
		return fail(op, ReasonMalformedRequest) // Gitea stores the id as given: only git's own spelling
	case !sameRepository(w.Route.Repository, in.Repository):
		return fail(op, ReasonWrongRepository)
	case noRoleReasons[op] != "":
		return fail(op, noRoleReasons[op]) // whatever the caller claimed, or did not
	case len(w.Forbidden) > 0:
		return fail(op, ReasonFieldNotPermitted)
	case slices.ContainsFunc(w.Text, ContainsReservedMarker):
		return fail(op, ReasonReservedMarker)
	}
	return op, nil
}

// authorizeByBranch authorizes a push, a contents API commit or a new pull request: every
// ref must be the work branch of one and the same active claim of the caller, and that
// claim must permit op. A new pull request must also reference the claimed issue.
func authorizeByBranch(in WriteInput, active []HeldClaim, op string, refs []string) WriteVerdict {
	if len(refs) == 0 {
		return refuse(op, ReasonMalformedRequest, "")
	}
	for _, ref := range refs {
		if in.DefaultBranch == "" || ref == "refs/heads/"+in.DefaultBranch {
			return refuseBranch(op, active, "")
		}
	}
	if in.Write.Route.Body == BodyOpenPull && (in.Write.PullBase != in.DefaultBranch || in.DefaultBranch == "") {
		return refuseBranch(op, active, "a pull request merges into the default branch only")
	}
	for _, h := range active {
		want := WorkRef(h.Namespace, h.Name)
		if slices.ContainsFunc(refs, func(r string) bool { return r != want }) {
			continue
		}
		c := h.Capability
		ok, reason := Authorize(c, false, Query{Worker: in.Worker, Repository: in.Repository, Target: c.Target.withRepository(c.Repository), Operation: op, Now: in.Now})
		if !ok {
			return refuseUnder(op, reason, h)
		}
		if in.Write.Route.Body == BodyOpenPull && !References(in.Write.PullText, c.Target.Number) {
			return refuse(op, ReasonMissingReference, h.Name)
		}
		if reason := checkTexts(in, c); reason != "" {
			return refuse(op, reason, h.Name)
		}
		return WriteVerdict{Allowed: true, Operation: op, Claim: h.Name}
	}
	return refuseBranch(op, active, "")
}

// refuseBranch refuses a push or a new pull request for its branch, with why (the fixed
// message when empty). When exactly one of the caller's active claims permits op, the
// message names that claim's work branch: the caller's own, never another task's.
func refuseBranch(op string, active []HeldClaim, why string) WriteVerdict {
	v := refuse(op, ReasonWrongBranch, "")
	if why != "" {
		v.Message = why
	}
	var branches []string
	for _, h := range active {
		if h.Capability != nil && slices.Contains(h.Capability.Operations, op) {
			branches = append(branches, WorkBranch(h.Namespace, h.Name))
		}
	}
	if len(branches) == 1 {
		v.Message += "; your claim's work branch is " + branches[0]
	}
	return v
}

// IsObjectID reports whether s is a git object id as git spells it: 40 (SHA-1) or 64
// (SHA-256) lowercase hexadecimal digits.
func IsObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ProtectedDir is the fleet's own directory in the repository: the published rule set
// lives there, and no worker write may change it.
const ProtectedDir = ".fleet"

// ProtectedPath reports whether a repository path is ProtectedDir or lies under it.
// Gitea compares paths case-sensitively, but a checkout on a case-insensitive file system
// would not, so neither does this.
func ProtectedPath(p string) bool {
	p = strings.ToLower(strings.TrimPrefix(p, "/"))
	return p == ProtectedDir || strings.HasPrefix(p, ProtectedDir+"/")
}

// TreeEntry is one entry of a git tree: its name, mode (octal, without leading zeros)
// and object id.
type TreeEntry struct {
	Name, Mode, ID string
}

// ProtectedDirChanged reports whether a commit's root tree, given by its entries,
// changes ProtectedDir against the default branch's entry (mode and id, both "" when the
// default branch has none): the entry edited, replaced, added or removed, or spelt twice
// (".fleet" and ".FLEET", which a case-insensitive checkout folds into one).
func ProtectedDirChanged(root []TreeEntry, defaultMode, defaultID string) bool {
	var found []TreeEntry
	for _, e := range root {
		if ProtectedPath(e.Name) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return defaultMode != "" || defaultID != ""
	case 1:
		return strings.TrimLeft(found[0].Mode, "0") != strings.TrimLeft(defaultMode, "0") || found[0].ID != defaultID
	}
	return true
}

// checkTexts applies the rules every text a permitted write carries must meet: each
// reference names an item the capability covers (the target; for a pull request, also
// the issues its own title and body name), and nothing the write lands, or a merge
// carries onto the default branch, touches ProtectedDir. It returns the refusal reason,
// or "".
func checkTexts(in WriteInput, c *Capability) string {
	w := in.Write
	covered := []int64{c.Target.Number}
	if c.Target.Kind == KindPullRequest {
		covered = append(covered, LinkedItems(in.TargetText, c.Repository)...)
	}
	texts := [][]string{w.Text, w.Commits}
	if w.Route.Body == BodyMerge {
		texts = append(texts, in.PullCommits)
	}
	for _, list := range texts {
		for _, t := range list {
			if !ReferencesOnly(t, c.Repository, covered...) {
				return ReasonUncoveredReference
			}
		}
	}
	paths := w.ChangedPaths
	if w.Route.Body == BodyMerge {
		paths = append(slices.Clone(paths), in.PullFiles...)
	}
	if slices.ContainsFunc(paths, ProtectedPath) {
		return ReasonProtectedPath
	}
	return ""
}

func (t Target) withRepository(repo string) Target {
	t.Repository = repo
	return t
}

// Markers that open the controller's machine-readable blocks in Gitea texts: the claim
// record in an issue or pull request body and the audit block of a lifecycle comment.
// giteaclaim writes them; no worker text may carry one.
const (
	RecordMarker = "<!-- fleet-claim:v1 "
	AuditMarker  = "<!-- fleet-claim-audit:v1 "
)

// ContainsReservedMarker reports whether text carries the start of a controller block
// (any spelling that begins like one, whatever follows).
func ContainsReservedMarker(text string) bool {
	return strings.Contains(text, "<!-- fleet-claim")
}

// CommentBudget bounds what one capability may write as comments: at most Comments
// comments of at most Bytes bytes in all.
type CommentBudget struct {
	Comments, Bytes int
}

// Allows reports whether one more comment of next bytes fits, after used comments of
// usedBytes bytes written under the same capability.
func (b CommentBudget) Allows(used, usedBytes, next int) bool {
	return used+1 <= b.Comments && usedBytes+next <= b.Bytes
}

// Comment blocks: how many comments a gateway replica reserves at once in a budget.
const (
	// CommentBlockMax is the most comments one block holds.
	CommentBlockMax = 8
	// CommentBlockEdge is how many comments (and that many average comments' bytes) must
	// be left for a block of more than one: near the end, each comment is reserved alone.
	CommentBlockEdge = 4 * CommentBlockMax
)

// Block sizes the block reserved for a comment of next bytes after used comments of
// usedBytes bytes: at least that comment, at most CommentBlockMax comments and a quarter
// of what is left, never more than the budget, and only the one comment once fewer than
// CommentBlockEdge comments or average comments' bytes are left. ok is false when the
// comment itself does not fit.
func (b CommentBudget) Block(used, usedBytes, next int) (comments, bytes int, ok bool) {
	if next < 0 || !b.Allows(used, usedBytes, next) {
		return 0, 0, false
	}
	leftComments, leftBytes := b.Comments-used, b.Bytes-usedBytes
	per := max(b.Bytes/max(b.Comments, 1), 1) // an average comment's share of the bytes
	if leftComments < CommentBlockEdge || leftBytes < CommentBlockEdge*per {
		return 1, next, true
	}
	comments = min(CommentBlockMax, leftComments/4)
	bytes = min(leftBytes, next+(comments-1)*per)
	return comments, bytes, true
}
