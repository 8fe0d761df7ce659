package forge

import (
	"strings"
	"testing"

	"github.com/giteatools/fleet-controller/internal/claim"
)

func TestBind(t *testing.T) {
	app := Candidate{Object: "app", Server: "a", Owner: "acme", Repo: "app", ID: 7}
	lib := Candidate{Object: "lib", Server: "a", Owner: "acme", Repo: "lib"}
	appOnB := Candidate{Object: "app-b", Server: "b", Owner: "acme", Repo: "app"}
	cases := []struct {
		name            string
		requested, flag string
		cands           []Candidate
		want            Binding
		problem         string
	}{
		{name: "named by one object", requested: "ACME/App", cands: []Candidate{app, lib}, want: Binding{Repository: "acme/app", Object: "app", Key: claim.RepositoryKey{Server: "a", ID: 7}}},
		{name: "the object wins over the flag's repository of the same name", requested: "acme/app", flag: "acme/app", cands: []Candidate{app}, want: Binding{Repository: "acme/app", Object: "app", Key: claim.RepositoryKey{Server: "a", ID: 7}}},
		{name: "the flag's repository when no object names it", requested: "acme/flags", flag: "Acme/Flags", cands: []Candidate{app}, want: Binding{Repository: "acme/flags"}},
		{name: "two objects name it", requested: "acme/app", cands: []Candidate{app, appOnB}, problem: "both name acme/app"},
		{name: "two objects are not passed over for the flag's repository", requested: "acme/app", flag: "acme/app", cands: []Candidate{app, appOnB}, problem: "cannot be told"},
		{name: "named by nothing", requested: "acme/ghost", flag: "acme/app", cands: []Candidate{lib}, problem: "acme/ghost is named by no GiteaRepository"},
		{name: "default: the flag's repository", flag: "acme/app", cands: []Candidate{lib}, want: Binding{Repository: "acme/app"}},
		{name: "default: the namespace's only object", cands: []Candidate{lib}, want: Binding{Repository: "acme/lib", Object: "lib", Key: claim.RepositoryKey{Server: "a"}}},
		{name: "default: several objects", cands: []Candidate{app, lib}, problem: "has 2 GiteaRepositories"},
		{name: "default: nothing at all", problem: "no GiteaRepository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Bind(tc.requested, tc.flag, tc.cands)
			if tc.problem != "" {
				if got.Repository != "" || !strings.Contains(got.Problem, tc.problem) {
					t.Fatalf("Bind = %+v, want no repository and a problem containing %q", got, tc.problem)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("Bind = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBindingCanonical(t *testing.T) {
	app := Candidate{Object: "app", Server: "a", Owner: "Acme", Repo: "App", ID: 42}
	appOnB := Candidate{Object: "app-b", Server: "b", Owner: "acme", Repo: "app", ID: 42}
	unresolved := Candidate{Object: "new", Server: "a", Owner: "acme", Repo: "new"}
	cases := []struct {
		name string
		b    Binding
		want string
	}{
		{"a resolved object: its server and ID", Bind("acme/app", "", []Candidate{app}), "gitea:a/42"},
		{"the same owner/name and ID on another server is another repository", Bind("acme/app", "", []Candidate{appOnB}), "gitea:b/42"},
		{"the flag's repository: its name, lower-cased", Bind("", "Acme/Flags", nil), "acme/flags"},
		{"an object without its ID yet: nothing", Bind("acme/new", "", []Candidate{unresolved}), ""},
		{"a binding with a problem: nothing", Bind("acme/ghost", "acme/flags", []Candidate{app}), ""},
		{"two objects naming it: nothing", Bind("acme/app", "", []Candidate{app, appOnB}), ""},
	}
	for _, tc := range cases {
		if got := tc.b.Canonical(); got != tc.want {
			t.Errorf("%s: Canonical() = %q, want %q", tc.name, got, tc.want)
		}
	}
	if p := Bind("acme/new", "", []Candidate{unresolved}).Resolved().Problem; !strings.Contains(p, "has not resolved a Gitea repository ID") {
		t.Errorf("Resolved() of a binding to an unresolved object: problem %q", p)
	}
	if b := Bind("acme/app", "", []Candidate{app}); b.Resolved() != b {
		t.Errorf("Resolved() changed a binding with a canonical value")
	}
	if got, want := Bind("acme/app", "", []Candidate{app}).Canonical(), claim.CanonicalBinding("acme/app", claim.RepositoryKey{Server: "a", ID: 42}); got != want {
		t.Errorf("Canonical() = %q, the claim pin's binding is %q: the two must agree", got, want)
	}
}
