package forge

import (
	"strings"
	"testing"

	"github.com/giteatools/fleet-controller/internal/claim"
)

func TestJudgeServer(t *testing.T) {
	ok := ServerFacts{Login: "fleet-controller", Version: "1.27.3"}
	tests := []struct {
		name   string
		facts  ServerFacts
		reason string
		in     string // a substring of the message
	}{
		{"answers with a supported version", ok, ReasonConnected, "answers as fleet-controller"},
		{"a newer version", ServerFacts{Login: "c", Version: "v1.28.0-dev+3"}, ReasonConnected, "1.28.0"},
		{"no token in the Secret", ServerFacts{TokenProblem: "Secret fleet-system/gitea has no key token"}, ReasonTokenSecretInvalid, "no key token"},
		{"the Secret's problem comes first", ServerFacts{TokenProblem: "missing", Unreachable: "refused"}, ReasonTokenSecretInvalid, "missing"},
		{"a CA bundle without certificates", ServerFacts{CAProblem: "no PEM certificate"}, ReasonCABundleInvalid, "PEM"},
		{"no answer", ServerFacts{Unreachable: "connection refused"}, ReasonUnreachable, "connection refused"},
		{"the token refused", ServerFacts{Refused: true, RefusedDetail: "401 token is required"}, ReasonTokenInvalid, "401"},
		{"an answer without an account", ServerFacts{Version: "1.27.3"}, ReasonTokenInvalid, "no account"},
		{"an old Gitea", ServerFacts{Login: "c", Version: "1.26.0"}, ReasonVersionUnsupported, "older than 1.27.3"},
		{"no version", ServerFacts{Login: "c"}, ReasonVersionUnsupported, "older than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeServer(tt.facts)
			if v.Reason != tt.reason || v.Ready != (tt.reason == ReasonConnected) || !strings.Contains(v.Message, tt.in) {
				t.Fatalf("JudgeServer = %+v, want reason %s and a message with %q", v, tt.reason, tt.in)
			}
		})
	}
}

func TestJudgeRepository(t *testing.T) {
	ready := &Verdict{Ready: true, Reason: ReasonConnected}
	protected := &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3", Workers: map[string]bool{"worker-1": false},
		Rules: []claim.BranchRule{{Name: "main", EnablePush: true, PushAllowlistOn: true, PushAllowlist: []string{"fleet-controller"}}}}
	found := func(f RepositoryFacts) RepositoryFacts {
		f.Server, f.FullName, f.ID = "gitea-a", "acme/app", 7
		if f.ServerVerdict == nil {
			f.ServerVerdict = ready
		}
		return f
	}
	tests := []struct {
		name   string
		facts  RepositoryFacts
		reason string
		in     string
	}{
		{"resolved and protected", found(RepositoryFacts{Setup: protected}), ReasonResolved, "acme/app (ID 7) on gitea-a"},
		{"no server", RepositoryFacts{Server: "gone", ServerMissing: true}, ReasonServerNotFound, `"gone"`},
		{"a server not checked yet", RepositoryFacts{Server: "gitea-a"}, ReasonServerNotReady, "not been checked"},
		{"a server not Ready", found(RepositoryFacts{ServerVerdict: &Verdict{Reason: ReasonTokenInvalid, Message: "401"}, Setup: protected}),
			ReasonServerNotReady, "TokenInvalid"},
		{"no answer", found(RepositoryFacts{Unreachable: "timeout"}), ReasonUnreachable, "timeout"},
		{"no such repository", RepositoryFacts{Server: "gitea-a", ServerVerdict: ready, NotFound: true, NotFoundDetail: "acme/app: 404"},
			ReasonRepositoryNotFound, "404"},
		{"an answer without an ID", RepositoryFacts{Server: "gitea-a", ServerVerdict: ready, FullName: "acme/app", Setup: protected},
			ReasonRepositoryNotFound, "named no repository"},
		{"a duplicate", found(RepositoryFacts{Duplicate: "app-first", Setup: protected}), ReasonDuplicateRepository, "app-first"},
		{"protection unreadable", found(RepositoryFacts{SetupProblem: "500"}), ReasonUnreachable, "500"},
		{"unprotected", found(RepositoryFacts{Setup: &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3"}}),
			ReasonDefaultBranchUnprotected, "not protected"},
		{"an administrator among the workers", found(RepositoryFacts{Setup: &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3",
			Rules: protected.Rules, Workers: map[string]bool{"worker-1": true}}}), ReasonWorkerCanWriteAroundGateway, "worker-1 is a Gitea site administrator"},
		{"a worker on the push allowlist", found(RepositoryFacts{Setup: &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3",
			Workers: map[string]bool{"worker-1": false},
			Rules:   []claim.BranchRule{{Name: "main", EnablePush: true, PushAllowlistOn: true, PushAllowlist: []string{"worker-1"}}}}}),
			ReasonWorkerCanWriteAroundGateway, "worker-1 may push"},
		{"the rule set not published", found(RepositoryFacts{Setup: protected, RuleSetProblem: "409: the branch moved"}),
			ReasonRuleSetUnpublished, "409: the branch moved"},
		{"a worker's rights outrank the rule set", found(RepositoryFacts{Setup: &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3",
			Rules: protected.Rules, Workers: map[string]bool{"worker-1": true}}, RuleSetProblem: "409"}),
			ReasonWorkerCanWriteAroundGateway, "worker-1"},
		{"unprotected outranks a worker's rights", found(RepositoryFacts{Setup: &claim.GiteaSetup{DefaultBranch: "main", Version: "1.27.3",
			Workers: map[string]bool{"worker-1": true}}}), ReasonDefaultBranchUnprotected, "not protected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeRepository(tt.facts)
			if v.Reason != tt.reason || v.Ready != (tt.reason == ReasonResolved) || !strings.Contains(v.Message, tt.in) {
				t.Fatalf("JudgeRepository = %+v, want reason %s and a message with %q", v, tt.reason, tt.in)
			}
		})
	}
}

func TestJudgeDeletion(t *testing.T) {
	v := JudgeDeletion(3)
	if v.Ready || v.Reason != ReasonDeleting || !strings.Contains(v.Message, "3 claim(s)") {
		t.Fatalf("a repository being deleted with claims in it: %+v", v)
	}
}
