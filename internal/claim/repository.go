package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// RepositoryKey is what a claim's repository is known by: the GiteaServer it is on and
// its Gitea repository ID, which a rename in Gitea changes neither of. The repository the
// manager's --gitea-url and --repository flags name has the zero key: it is known by its
// name, as it was before repositories were objects.
type RepositoryKey struct {
	Server string
	ID     int64
}

// Named reports whether k is the zero key of the flags' repository.
func (k RepositoryKey) Named() bool { return k == RepositoryKey{} }

// String renders the key as server/id, or "" for the flags' repository.
func (k RepositoryKey) String() string {
	if k.Named() {
		return ""
	}
	return k.Server + "/" + strconv.FormatInt(k.ID, 10)
}

// CanonicalBinding is the canonical value of a worker's repository binding, the pin's
// repository_binding: for a repository of a GiteaRepository, its key as "gitea:" server
// "/" ID, which a rename in Gitea does not change and no "owner/name" can spell; for the
// flags' repository (the zero key), the binding's name, lower-cased, as pins held it
// before repositories were objects.
func CanonicalBinding(binding string, where RepositoryKey) string {
	if where.Named() {
		return norm(binding)
	}
	return "gitea:" + where.String()
}

// LockName is the deterministic name of a target's lock, a coordination Lease in the
// claim's namespace: one per (server, repository ID, kind, number), so two repositories
// with the same issue numbers never share a lock, and a rename changes no lock. The head
// is not part of it (one lock per issue or pull request).
//
// The flags' repository keeps the name its locks had before repositories were objects,
// over its lower-cased name, kind and number: locks held across an upgrade stay the
// claims' locks.
func LockName(k RepositoryKey, t Target) string {
	var in string
	if k.Named() {
		in = strings.ToLower(t.Repository) + "|" + string(t.Kind) + "|" + strconv.FormatInt(t.Number, 10)
	} else {
		in = "server=" + k.Server + "|id=" + strconv.FormatInt(k.ID, 10) + "|" + string(t.Kind) + "|" + strconv.FormatInt(t.Number, 10)
	}
	sum := sha256.Sum256([]byte(in))
	return "fleet-claim-" + hex.EncodeToString(sum[:])[:20]
}

// SlotName is the name of slot i of repository k's active claims, a coordination Lease
// in the claim's namespace: a repository capped at N active claims (a GiteaRepository's
// spec.maxActiveClaims) has slots 0..N-1, and each claim that publishes holds one.
func SlotName(k RepositoryKey, i int) string {
	return SlotsOf(k) + "-" + strconv.Itoa(i)
}

// SlotsOf is the label value, and the name prefix, that the slots of repository k share.
func SlotsOf(k RepositoryKey) string {
	sum := sha256.Sum256([]byte("slots|server=" + k.Server + "|id=" + strconv.FormatInt(k.ID, 10)))
	return "fleet-slots-" + hex.EncodeToString(sum[:])[:20]
}

// Slot is what a claim reads of one slot of its repository.
type Slot struct {
	// Index is the slot's number; Holder the claim that holds it ("" when free).
	Index  int
	Holder string
}

// SlotChoice is which slot a claim takes.
type SlotChoice struct {
	// Held: the claim holds slot Index already (an earlier attempt took it).
	Held bool
	// Index is the slot to take: Create says it does not exist yet, else it exists and
	// is free. Full: every slot below the limit is held by another claim.
	Index  int
	Create bool
	Full   bool
}

// ChooseSlot picks the slot claim takes among slots (as read), below limit: the one it
// holds already, else the lowest free one, else the lowest that does not exist yet.
// Slots at or above the limit (left from a higher limit) are never taken, and their
// holders keep them until they end.
func ChooseSlot(slots []Slot, claim string, limit int) SlotChoice {
	byIndex := make(map[int]Slot, len(slots))
	for _, s := range slots {
		if s.Holder == claim {
			return SlotChoice{Held: true, Index: s.Index}
		}
		byIndex[s.Index] = s
	}
	for i := range limit {
		s, exists := byIndex[i]
		switch {
		case !exists:
			return SlotChoice{Index: i, Create: true}
		case s.Holder == "":
			return SlotChoice{Index: i}
		}
	}
	return SlotChoice{Full: true}
}

// RepositoryAtLimit is the refusal of a claim whose repository has as many active claims
// as its GiteaRepository's spec.maxActiveClaims allows: every slot is held.
func RepositoryAtLimit(target Target) Result {
	return loss(ruleRepositoryClaimLimit, target)
}

// RepositoryNotServed is the final refusal of a target in a repository the controller
// does not serve in the claim's namespace: no GiteaRepository there names it, and it is
// not the flags' repository.
func RepositoryNotServed(target Target) Result {
	return refusal(ruleControllerRepoMismatch, OutcomeRejected, target)
}

// NotServed reports whether r is the refusal of a repository the controller does not
// serve (RepositoryNotServed). The reconciler then refuses with ValidateUnserved, which
// cites the first rule the request breaks in the rules' order.
func (r Result) NotServed() bool {
	return r.Refused() && r.RuleID == string(ruleControllerRepoMismatch)
}

// ValidateUnserved validates a request in a repository the controller does not serve,
// where there is no target state to read: it refuses for the worker (not registered,
// not live, denied), the target's shape or the worker's binding when one of those fails
// first, as Validate would in a served repository, and otherwise as RepositoryNotServed.
func ValidateUnserved(in ValidateInput) Result {
	in.ControllerRepository, in.State = "", TargetState{}
	_, r := Validate(in)
	return r
}

// RepositoryNotReady is the final refusal of a validation or claim in a repository that
// is not Ready: its server is unreachable or refuses the controller's token, its default
// branch is not protected, its rule set is not published, or two of the namespace's
// GiteaRepositories claim its name. Nothing is decided there until it is Ready again.
func RepositoryNotReady(target Target) Result {
	return loss(ruleRepositoryNotReady, target)
}

// RepositoryMoved is the final refusal of a claim whose repository is no longer the one
// its validation found: the namespace's GiteaRepository for the name was replaced by one
// on another server or repository ID. The pinned state was read there, not here.
func RepositoryMoved(target Target) Result {
	return loss(ruleRepositoryBindingChanged, target)
}
