package forge

import (
	"strings"
	"testing"
)

const inForce = "sha256:aaaa"

func ready(object, server, repo string, id int64) Candidate {
	const owner = "acme"
	return Candidate{Object: object, Server: server, Owner: owner, Repo: repo, ID: id, Ready: true, Reason: ReasonResolved, RuleSetDigest: inForce}
}

func TestResolve(t *testing.T) {
	app := ready("app", "gitea-a", "app", 7)
	tests := []struct {
		name      string
		requested string
		cands     []Candidate
		found     bool
		usable    string // the object resolved to ("" when not usable)
		problem   string // a part of Problem
	}{
		{name: "no object names it", requested: "acme/app", cands: []Candidate{ready("lib", "gitea-a", "lib", 8)}},
		{name: "no objects at all", requested: "acme/app"},
		{name: "names compare as Gitea compares them", requested: "ACME/App", cands: []Candidate{app}, found: true, usable: "app"},
		{name: "the same name on another server in another object is not mixed up", requested: "acme/app",
			cands: []Candidate{ready("lib", "gitea-b", "lib", 7), app}, found: true, usable: "app"},
		{name: "not Ready", requested: "acme/app", cands: []Candidate{{Object: "app", Server: "gitea-a", Owner: "acme", Repo: "app", ID: 7,
			Reason: ReasonServerNotReady, Message: "the GiteaServer gitea-a is not Ready", RuleSetDigest: inForce}},
			found: true, problem: "is not Ready (ServerNotReady)"},
		{name: "never checked", requested: "acme/app", cands: []Candidate{{Object: "app", Server: "gitea-a", Owner: "acme", Repo: "app"}},
			found: true, problem: "not checked yet"},
		{name: "a younger twin that is not Ready leaves the older one", requested: "acme/app",
			cands: []Candidate{{Object: "app-2", Server: "gitea-b", Owner: "acme", Repo: "app", Reason: ReasonDuplicateRepository}, app},
			found: true, usable: "app"},
		{name: "two Ready objects for one name are never guessed between", requested: "acme/app",
			cands: []Candidate{app, ready("app-b", "gitea-b", "app", 9)}, found: true, problem: "cannot be told"},
		{name: "Ready without an ID", requested: "acme/app", cands: []Candidate{ready("app", "gitea-a", "app", 0)},
			found: true, problem: "has not resolved"},
		{name: "another rule set published", requested: "acme/app",
			cands: []Candidate{{Object: "app", Server: "gitea-a", Owner: "acme", Repo: "app", ID: 7, Ready: true, RuleSetDigest: "sha256:bbbb"}},
			found: true, problem: "read back rule set sha256:bbbb"},
		{name: "no rule set read back", requested: "acme/app",
			cands: []Candidate{{Object: "app", Server: "gitea-a", Owner: "acme", Repo: "app", ID: 7, Ready: true}},
			found: true, problem: "read back rule set none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Resolve(tt.requested, tt.cands, inForce)
			if res.Found != tt.found {
				t.Fatalf("Found = %v, want %v (%+v)", res.Found, tt.found, res)
			}
			if res.Usable != (tt.usable != "") {
				t.Fatalf("Usable = %v, want %v (%+v)", res.Usable, tt.usable != "", res)
			}
			if tt.usable != "" && res.Repository.Object != tt.usable {
				t.Errorf("resolved to %s, want %s", res.Repository.Object, tt.usable)
			}
			if tt.usable != "" && res.Problem != "" {
				t.Errorf("a usable resolution carries the problem %q", res.Problem)
			}
			if tt.problem != "" && !strings.Contains(res.Problem, tt.problem) {
				t.Errorf("Problem = %q, want it to say %q", res.Problem, tt.problem)
			}
		})
	}
}

// A GiteaRepository that names the repository decides, fit or not; the flags' repository
// serves only a name no GiteaRepository of the namespace holds.
func TestServe(t *testing.T) {
	usable := Resolution{Found: true, Usable: true}
	unfit := Resolution{Found: true, Problem: "not Ready"}
	for _, tt := range []struct {
		name             string
		res              Resolution
		requested, flags string
		want             Serving
	}{
		{"a usable object", usable, "fleet/app", "", ServedByObject},
		{"a usable object before the flags' repository of the same name", usable, "fleet/app", "fleet/app", ServedByObject},
		{"an unfit object is never passed over for the flags", unfit, "fleet/app", "fleet/app", NotReady},
		{"the flags' repository, any case", Resolution{}, "Fleet/App", "fleet/app", ServedByFlags},
		{"another name than the flags'", Resolution{}, "fleet/other", "fleet/app", NotServed},
		{"no flags", Resolution{}, "fleet/app", "", NotServed},
		{"an empty binding with no flags", Resolution{}, "", "", NotServed},
	} {
		if got := Serve(tt.res, tt.requested, tt.flags); got != tt.want {
			t.Errorf("%s: Serve = %v, want %v", tt.name, got, tt.want)
		}
	}
}
