package claim

import (
	"strings"
	"testing"
)

func TestCheckHardening(t *testing.T) {
	protected := BranchRule{Name: "main", EnablePush: true, PushAllowlistOn: true, PushAllowlist: []string{"fleet-controller"}}
	workers := map[string]bool{"worker-1": false, "worker-2": false}
	tests := []struct {
		name  string
		setup GiteaSetup
		want  []string // substrings, one per finding
	}{
		{"as docs/gateway.md asks", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected}, Workers: workers}, nil},
		{"no push at all", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{{Name: "main"}}, Workers: workers}, nil},
		{"a glob rule", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{{Name: "ma*"}}, Workers: workers}, nil},
		{"unprotected", GiteaSetup{DefaultBranch: "main", Workers: workers}, []string{"is not protected"}},
		{"a rule for another branch only", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{{Name: "release"}}, Workers: workers}, []string{"is not protected"}},
		{"every writer may push", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{{Name: "main", EnablePush: true}}, Workers: workers}, []string{"every writer"}},
		{"a worker on the allowlist", GiteaSetup{DefaultBranch: "main", Workers: workers,
			Rules: []BranchRule{{Name: "main", EnablePush: true, PushAllowlistOn: true, PushAllowlist: []string{"Worker-2"}}}}, []string{"worker-2 may push"}},
		{"a worker that is an administrator", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected},
			Workers: map[string]bool{"worker-1": true}}, []string{"worker-1 is a Gitea site administrator"}},
		{"unknown default branch", GiteaSetup{Workers: workers}, []string{"default branch is unknown"}},
		{"a Gitea before the token-scope fixes", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected}, Workers: workers, Version: "1.26.0"},
			[]string{"older than 1.27.3"}},
		{"an unreadable version", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected}, Workers: workers, Version: "dev"},
			[]string{"older than 1.27.3"}},
		{"a newer Gitea", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected}, Workers: workers, Version: "v1.28.0-dev+12-gabc"}, nil},
		{"a release candidate of 1.27.3", GiteaSetup{DefaultBranch: "main", Rules: []BranchRule{protected}, Workers: workers, Version: "1.27.3-rc1"},
			[]string{"older than 1.27.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup.Version == "" {
				tt.setup.Version = "1.27.3"
			}
			got := CheckHardening(tt.setup)
			if len(got) != len(tt.want) {
				t.Fatalf("findings = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Fatalf("finding %q lacks %q", got[i], w)
				}
			}
		})
	}
}
