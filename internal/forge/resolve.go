package forge

import (
	"fmt"
	"strings"
)

// Candidate is one GiteaRepository of a claim's namespace, as resolving the claim's
// repository reads it.
type Candidate struct {
	// Object is the GiteaRepository's name.
	Object string
	// Server, Owner and Repo are its spec: the GiteaServer and "owner/name" it names.
	Server, Owner, Repo string
	// ID is the Gitea repository ID it resolved to (0 before it did).
	ID int64
	// Ready is its Ready condition, true only when recorded for its current generation;
	// Reason and Message are that condition's.
	Ready           bool
	Reason, Message string
	// RuleSetDigest is the digest of the rule set its last check read back from Gitea.
	RuleSetDigest string
	// MaxActiveClaims caps the claims of the repository holding an active capability at
	// once (0: no cap of its own).
	MaxActiveClaims int32
}

// Resolution is where a claim's repository is, or why claims cannot be decided there.
type Resolution struct {
	// Found says a GiteaRepository of the namespace names the repository.
	Found bool
	// Usable says exactly one of those is Ready, resolved, and holds the rule set in
	// force: Repository is then that one. Otherwise Problem says what is missing.
	Usable     bool
	Repository Candidate
	Problem    string
}

// Resolve finds the repository requested ("owner/name", compared as Gitea compares
// names) among a namespace's GiteaRepositories. It is usable only when exactly one of
// them is Ready, has resolved to an ID, and read back the rule set with digest ruleSet:
// a repository two objects name (on two servers), or one whose check failed or is not
// current, is never guessed at (fail closed).
func Resolve(requested string, candidates []Candidate, ruleSet string) Resolution {
	var named, ready []Candidate
	for _, c := range candidates {
		if strings.EqualFold(c.Owner+"/"+c.Repo, requested) {
			named = append(named, c)
			if c.Ready {
				ready = append(ready, c)
			}
		}
	}
	switch {
	case len(named) == 0:
		return Resolution{}
	case len(ready) == 0:
		c := named[0]
		why := c.Reason
		if why == "" {
			why = "not checked yet"
		}
		return Resolution{Found: true, Repository: c, Problem: fmt.Sprintf("the GiteaRepository %s is not Ready (%s): %s", c.Object, why, c.Message)}
	case len(ready) > 1:
		return Resolution{Found: true, Repository: ready[0], Problem: fmt.Sprintf(
			"the GiteaRepositories %s and %s both name %s and are both Ready; which one is meant cannot be told", ready[0].Object, ready[1].Object, requested)}
	}
	c := ready[0]
	switch {
	case c.ID <= 0:
		return Resolution{Found: true, Repository: c, Problem: fmt.Sprintf("the GiteaRepository %s has not resolved to a Gitea repository ID", c.Object)}
	case c.RuleSetDigest != ruleSet:
		have := c.RuleSetDigest
		if have == "" {
			have = "none"
		}
		return Resolution{Found: true, Repository: c, Problem: fmt.Sprintf(
			"the GiteaRepository %s read back rule set %s, not the one in force (%s)", c.Object, have, ruleSet)}
	}
	return Resolution{Found: true, Usable: true, Repository: c}
}

// Serving is where claims on a repository are decided for a namespace, and where the
// gateway sends its workers' requests.
type Serving int

const (
	// NotServed: no GiteaRepository of the namespace names the repository, and it is not
	// the repository of the manager's --repository flag.
	NotServed Serving = iota
	// NotReady: a GiteaRepository names it but is not fit for claims now
	// (Resolution.Problem says why).
	NotReady
	// ServedByObject: the GiteaRepository Resolution.Repository serves it.
	ServedByObject
	// ServedByFlags: it is the --repository flag's repository, on --gitea-url.
	ServedByFlags
)

// Serve decides where requested ("owner/name") is served for a namespace, from res, what
// Resolve found among the namespace's GiteaRepositories, and flags, the --repository
// flag's repository ("" for a manager started without it). A GiteaRepository that names
// the repository comes first, and one that is not fit is never passed over for the
// flags' repository of the same name: nothing is guessed.
func Serve(res Resolution, requested, flags string) Serving {
	switch {
	case res.Found && res.Usable:
		return ServedByObject
	case res.Found:
		return NotReady
	case flags != "" && strings.EqualFold(strings.TrimSpace(requested), strings.TrimSpace(flags)):
		return ServedByFlags
	}
	return NotServed
}
