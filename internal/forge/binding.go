package forge

import (
	"fmt"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Binding is the repository a namespace's WorkerRegistration or RetirementPlan is bound
// to: one of the namespace's GiteaRepositories, or the --repository flag's repository.
type Binding struct {
	// Repository is the bound repository as "owner/name" ("" when nothing is bound).
	Repository string
	// Object is the GiteaRepository that names it ("" for the flag's repository).
	Object string
	// Key is that GiteaRepository's server and the Gitea repository ID it resolved to
	// (zero for the flag's repository; ID 0 while the object has not resolved one).
	Key claim.RepositoryKey
	// Problem says why the binding names no repository of the namespace ("" when it
	// does). A binding with a problem binds nothing: whatever rests on it fails closed.
	Problem string
}

// Bind resolves requested ("owner/name", compared as Gitea compares names; "" asks for
// the default) against candidates, the GiteaRepositories of the namespace, and flags,
// the --repository flag's repository ("" for a manager started without it).
//
// A named repository binds when exactly one GiteaRepository of the namespace names it,
// whether or not that one is Ready (a binding says which repository is meant; whether
// claims can be decided there now is Resolve's question), or, when none does, when it is
// the flag's repository. Two objects naming it (on two servers) bind nothing: which one
// is meant cannot be told. No name binds the flag's repository, else the namespace's only
// GiteaRepository; a namespace with several must name one.
func Bind(requested, flags string, candidates []Candidate) Binding {
	req := strings.TrimSpace(requested)
	if req == "" {
		switch {
		case flags != "":
			return Binding{Repository: flags}
		case len(candidates) == 1:
			c := candidates[0]
			return boundTo(c)
		case len(candidates) == 0:
			return Binding{Problem: "no repository is named, the namespace has no GiteaRepository, and the manager serves no --repository"}
		}
		return Binding{Problem: fmt.Sprintf("no repository is named and the namespace has %d GiteaRepositories: name one of them", len(candidates))}
	}
	var named []Candidate
	for _, c := range candidates {
		if strings.EqualFold(c.Owner+"/"+c.Repo, req) {
			named = append(named, c)
		}
	}
	switch {
	case len(named) == 1:
		return boundTo(named[0])
	case len(named) > 1:
		return Binding{Problem: fmt.Sprintf("the GiteaRepositories %s and %s both name %s; which one is meant cannot be told", named[0].Object, named[1].Object, req)}
	case flags != "" && strings.EqualFold(req, strings.TrimSpace(flags)):
		return Binding{Repository: req}
	}
	return Binding{Problem: fmt.Sprintf("%s is named by no GiteaRepository of the namespace, and it is not the manager's --repository", req)}
}

// boundTo is the binding to the GiteaRepository c.
func boundTo(c Candidate) Binding {
	return Binding{Repository: c.Owner + "/" + c.Repo, Object: c.Object, Key: claim.RepositoryKey{Server: c.Server, ID: c.ID}}
}

// Resolved is b as something that must be compared by its canonical value (a
// RetirementPlan's binding): a binding to an object that has not resolved its Gitea
// repository ID yet binds nothing, and says so in Problem.
func (b Binding) Resolved() Binding {
	if b.Problem == "" && b.Canonical() == "" {
		b.Problem = fmt.Sprintf("the GiteaRepository %s naming %s has not resolved a Gitea repository ID yet", b.Object, b.Repository)
	}
	return b
}

// Canonical is the binding's canonical value, the one retirement compares rows by and
// puts into its fingerprints where a registration's repository binding goes: for a
// GiteaRepository, its key "gitea:<server>/<id>" as a claim's pin holds it
// (claim.CanonicalBinding), which a rename in Gitea does not change and which differs
// for the same owner/name on another server; for the flag's repository, its lower-cased
// owner/name. It is "" when b binds nothing, or binds an object that has not resolved its
// Gitea repository ID yet: nothing can be compared with such a binding.
func (b Binding) Canonical() string {
	switch {
	case b.Problem != "" || b.Repository == "":
		return ""
	case b.Object == "":
		return claim.CanonicalBinding(b.Repository, claim.RepositoryKey{})
	case b.Key.ID == 0 || b.Key.Server == "":
		return ""
	}
	return claim.CanonicalBinding(b.Repository, b.Key)
}
