package retirement

import (
	"strings"
	"testing"
	"time"
)

var planCreated = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// intact is a guard installed well before planCreated, equal to the shipped one.
func intact() ApprovalGuard {
	return ApprovalGuard{PolicyFound: true, BindingFound: true, LastWritten: planCreated.Add(-time.Hour)}
}

func TestJudgeGuard(t *testing.T) {
	tests := []struct {
		name   string
		guard  func(g *ApprovalGuard)
		reason string
		says   string
	}{
		{"installed long before the plan, unaltered", func(*ApprovalGuard) {}, "", ""},
		{"no policy", func(g *ApprovalGuard) { g.PolicyFound = false }, ConditionApprovalPolicyMissing, "no ValidatingAdmissionPolicy)"},
		{"no binding", func(g *ApprovalGuard) { g.BindingFound = false }, ConditionApprovalPolicyMissing, "no ValidatingAdmissionPolicyBinding"},
		{"neither", func(g *ApprovalGuard) { g.PolicyFound, g.BindingFound = false, false }, ConditionApprovalPolicyMissing, "and its binding"},
		{"altered", func(g *ApprovalGuard) { g.Differences = []string{"binding validationActions [Warn]"} }, ConditionApprovalPolicyAltered, "validationActions [Warn]"},
		{"missing beats altered", func(g *ApprovalGuard) { g.BindingFound, g.Differences = false, []string{"x"} }, ConditionApprovalPolicyMissing, ""},
		{"restored after the plan was created", func(g *ApprovalGuard) { g.LastWritten = planCreated.Add(time.Minute) },
			ConditionApprovalPolicyMissing, "not in place unchanged since before this plan"},
		{"written in the same second as the plan", func(g *ApprovalGuard) { g.LastWritten = planCreated.Add(900 * time.Millisecond) },
			ConditionApprovalPolicyMissing, ""},
		{"written one second before the plan: may not be enforced yet", func(g *ApprovalGuard) { g.LastWritten = planCreated.Add(-time.Second) },
			ConditionApprovalPolicyMissing, ""},
		{"written two seconds before the plan: settled", func(g *ApprovalGuard) { g.LastWritten = planCreated.Add(-2 * time.Second) }, "", ""},
	}
	for _, tt := range tests {
		g := intact()
		tt.guard(&g)
		reason, msg := JudgeGuard(g, planCreated)
		if reason != tt.reason || !strings.Contains(msg, tt.says) {
			t.Errorf("%s: JudgeGuard = %q, %q; want %q containing %q", tt.name, reason, msg, tt.reason, tt.says)
		}
	}
}

func TestIsWorker(t *testing.T) {
	const sa = "system:serviceaccount:fleet:bot-alice"
	tests := []struct {
		name   string
		facts  SubjectFacts
		worker bool
	}{
		{"a user is never a worker, whatever it holds", SubjectFacts{User: "alice", HasRegistration: true, HoldsWorkerVerb: true}, false},
		{"a ServiceAccount with a registration of its name", SubjectFacts{User: sa, HasRegistration: true}, true},
		{"a ServiceAccount holding the fleet-worker role", SubjectFacts{User: sa, HoldsWorkerVerb: true}, true},
		{"a ServiceAccount whose worker verb comes from a wildcard", SubjectFacts{User: sa, HoldsWorkerVerb: true, HoldsEveryVerb: true}, false},
		{"a wildcard does not excuse a registration", SubjectFacts{User: sa, HasRegistration: true, HoldsWorkerVerb: true, HoldsEveryVerb: true}, true},
		{"a GitOps ServiceAccount", SubjectFacts{User: "system:serviceaccount:flux-system:kustomize-controller"}, false},
		{"a malformed ServiceAccount name is a user", SubjectFacts{User: "system:serviceaccount:fleet", HoldsWorkerVerb: true}, false},
	}
	for _, tt := range tests {
		got, why := IsWorker(tt.facts)
		if got != tt.worker || (got && !strings.Contains(why, "is a worker")) {
			t.Errorf("%s: IsWorker = %v, %q; want %v", tt.name, got, why, tt.worker)
		}
	}
}

func TestServiceAccountOf(t *testing.T) {
	for user, want := range map[string][2]string{
		"system:serviceaccount:fleet:bot":  {"fleet", "bot"},
		"system:serviceaccount:fleet:":     {},
		"system:serviceaccount::bot":       {},
		"system:serviceaccount:fleet:a:b":  {},
		"admin":                            {},
		"system:serviceaccounts:fleet:bot": {},
	} {
		ns, name, ok := ServiceAccountOf(user)
		if [2]string{ns, name} != want || ok != (want[0] != "") {
			t.Errorf("ServiceAccountOf(%q) = %q, %q, %v; want %v", user, ns, name, ok, want)
		}
	}
}

func TestJudgeApproval(t *testing.T) {
	const sa = "system:serviceaccount:fleet:bot"
	ok := func() ApprovalFacts {
		return ApprovalFacts{Guard: intact(), PlanCreated: planCreated, Subject: SubjectFacts{User: "gitops"}, Authorized: true}
	}
	tests := []struct {
		name   string
		facts  func(f *ApprovalFacts)
		reason string
		final  bool
	}{
		{"matches, guarded, authorized", func(*ApprovalFacts) {}, ConditionApprovalMatches, false},
		{"mismatch is final, whatever else", func(f *ApprovalFacts) { f.Mismatch, f.Guard, f.Authorized = "tokens differ", ApprovalGuard{}, false },
			ConditionApprovalMismatch, true},
		{"policy missing: final, even for an authorized approver", func(f *ApprovalFacts) { f.Guard.PolicyFound = false }, ConditionApprovalPolicyMissing, true},
		{"policy altered: final", func(f *ApprovalFacts) { f.Guard.Differences = []string{"failurePolicy Ignore"} }, ConditionApprovalPolicyAltered, true},
		{"policy restored after the plan: final", func(f *ApprovalFacts) { f.Guard.LastWritten = planCreated.Add(time.Hour) }, ConditionApprovalPolicyMissing, true},
		{"worker approver: final, even when authorized", func(f *ApprovalFacts) { f.Subject = SubjectFacts{User: sa, HasRegistration: true} },
			ConditionApproverIsWorker, true},
		{"worker beats unauthorized", func(f *ApprovalFacts) { f.Subject, f.Authorized = SubjectFacts{User: sa, HoldsWorkerVerb: true}, false },
			ConditionApproverIsWorker, true},
		{"unauthorized: looked at again", func(f *ApprovalFacts) { f.Authorized, f.AuthorizerWhy = false, "no verb" }, ConditionApproverNotAuthorized, false},
	}
	for _, tt := range tests {
		f := ok()
		tt.facts(&f)
		v := JudgeApproval(f)
		if v.Reason != tt.reason || v.Final != tt.final || v.Approved != (tt.reason == ConditionApprovalMatches) || v.Message == "" {
			t.Errorf("%s: JudgeApproval = %+v; want reason %s, final %v", tt.name, v, tt.reason, tt.final)
		}
	}
}

func TestApprovalEventDue(t *testing.T) {
	refused := ApprovalVerdict{Reason: ConditionApproverNotAuthorized}
	tests := []struct {
		name     string
		previous string
		v        ApprovalVerdict
		want     bool
	}{
		{"first refusal", ConditionAwaitingApproval, refused, true},
		{"the same refusal on a recheck", ConditionApproverNotAuthorized, refused, false},
		{"another refusal", ConditionApproverNotAuthorized, ApprovalVerdict{Reason: ConditionApprovalPolicyMissing, Final: true}, true},
		{"approved", ConditionApproverNotAuthorized, ApprovalVerdict{Approved: true, Reason: ConditionApprovalMatches}, false},
	}
	for _, tt := range tests {
		if got := ApprovalEventDue(tt.previous, tt.v); got != tt.want {
			t.Errorf("%s: ApprovalEventDue = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	b := Backoff{Initial: 10 * time.Second, Max: time.Minute}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := b.After(i + 1); got != w {
			t.Errorf("After(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := b.After(1000); got != time.Minute {
		t.Errorf("After(1000) = %v, want the cap", got)
	}
	if d := DefaultApproverBackoff; d.Initial <= 0 || d.Max < d.Initial {
		t.Errorf("DefaultApproverBackoff = %+v", d)
	}
}

func TestRecheckDue(t *testing.T) {
	c := Recheck{Rows: 100, Interval: 10 * time.Second}
	tests := []struct {
		name    string
		c       Recheck
		rows    int
		elapsed time.Duration
		want    bool
	}{
		{"fresh check", c, 0, 0, false},
		{"99 rows in 9s", c, 99, 9 * time.Second, false},
		{"100 rows", c, 100, time.Second, true},
		{"10 seconds", c, 1, 10 * time.Second, true},
		{"every row", Recheck{Rows: 1}, 1, 0, true},
		{"rows trigger off", Recheck{Interval: time.Second}, 1000, 0, false},
		{"both off", Recheck{}, 1000, time.Hour, false},
	}
	for _, tt := range tests {
		if got := tt.c.Due(tt.rows, tt.elapsed); got != tt.want {
			t.Errorf("%s: Due(%d, %v) = %v, want %v", tt.name, tt.rows, tt.elapsed, got, tt.want)
		}
	}
	if DefaultApproverRecheck != (Recheck{Rows: 100, Interval: 10 * time.Second}) {
		t.Errorf("DefaultApproverRecheck = %+v", DefaultApproverRecheck)
	}
}
