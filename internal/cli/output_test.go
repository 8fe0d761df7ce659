package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// render prints obj with -o format through the command's output flag.
func render(t *testing.T, format string, obj runtime.Object, human func(io.Writer, bool) error) string {
	t.Helper()
	cmd := &cobra.Command{Use: "x"}
	out := addOutputFlag(cmd)
	if err := cmd.Flags().Set("output", format); err != nil {
		t.Fatal(err)
	}
	if err := out.validate(); err != nil {
		t.Fatalf("-o %s: %v", format, err)
	}
	var b bytes.Buffer
	if err := out.print(&b, obj, human); err != nil {
		t.Fatalf("-o %s: %v", format, err)
	}
	return b.String()
}

var expires = metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

func activeClaim() *fleetv1alpha1.TaskClaim {
	return &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "bot-1-pr-12-abcde", Namespace: "fleet"},
		Spec: fleetv1alpha1.TaskClaimSpec{Worker: "bot-1", Target: fleetv1alpha1.TaskTarget{Repository: "acme/widgets",
			Kind: fleetv1alpha1.TargetKindPullRequest, Number: 12, HeadSHA: "3f2a1b0c9d8e7f6a"}},
		Status: fleetv1alpha1.TaskClaimStatus{Phase: fleetv1alpha1.ClaimPhaseActive, Role: "reviewer",
			Capability: &fleetv1alpha1.TaskCapability{Worker: "bot-1", Identity: "bot-1", Repository: "acme/widgets",
				Target: fleetv1alpha1.ClaimTargetRef{Kind: fleetv1alpha1.TargetKindPullRequest, Number: 12, HeadSHA: "3f2a1b0c9d8e7f6a"},
				Role:   "reviewer", Operations: []string{"review", "comment"}, Pin: "sha256:aa", LeaseName: "fleet-claim-x",
				LeaseGeneration: "42", ExpiresAt: expires}},
	}
}

func TestClaimOutput(t *testing.T) {
	tc := activeClaim()
	human := func(w io.Writer, wide bool) error { return printCapability(w, tc, wide) }

	got := render(t, "", tc, human)
	for _, want := range []string{"CLAIM", "bot-1-pr-12-abcde", "acme/widgets!12@3f2a1b0c9d8e", "reviewer", "review,comment", "2026-12-01T12:00:00Z"} {
		if !strings.Contains(got, want) {
			t.Errorf("default output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "fleet-claim-x") {
		t.Errorf("default output shows the lease:\n%s", got)
	}
	if !strings.Contains(got, "WORK BRANCH") || !strings.Contains(got, "<none>") {
		t.Errorf("a reviewer's claim shows no work branch, as <none>:\n%s", got)
	}
	author := activeClaim()
	author.Name, author.Status.Role, author.Status.Capability.Role = "bot-1-issue-7-fghij", "author", "author"
	author.Status.Capability.Operations = []string{"comment", "push_branch", "open_pull_request"}
	if got := render(t, "", author, func(w io.Writer, wide bool) error { return printCapability(w, author, wide) }); !strings.Contains(got, "fleet/fleet/bot-1-issue-7-fghij") {
		t.Errorf("an author's claim shows its work branch fleet/<namespace>/<claim>:\n%s", got)
	}
	wide := render(t, "wide", tc, human)
	for _, want := range []string{"PIN", "sha256:aa", "fleet-claim-x", "42"} {
		if !strings.Contains(wide, want) {
			t.Errorf("wide output lacks %q:\n%s", want, wide)
		}
	}

	var fromJSON fleetv1alpha1.TaskClaim
	if err := json.Unmarshal([]byte(render(t, "json", tc, human)), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if fromJSON.Kind != "TaskClaim" || fromJSON.APIVersion != fleetv1alpha1.GroupVersion.String() || fromJSON.Status.Capability.Role != "reviewer" {
		t.Errorf("json output: %+v", fromJSON)
	}
	var fromYAML fleetv1alpha1.TaskClaim
	if err := yaml.Unmarshal([]byte(render(t, "yaml", tc, human)), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if fromYAML.Status.Capability.ExpiresAt.UTC() != expires.UTC() {
		t.Errorf("yaml output: %+v", fromYAML.Status.Capability)
	}
	if got := render(t, "name", tc, human); got != "taskclaim.fleet.giteatools.dev/bot-1-pr-12-abcde\n" {
		t.Errorf("name output %q", got)
	}
	if got := render(t, "jsonpath={.status.capability.operations[0]}", tc, human); got != "review" {
		t.Errorf("jsonpath output %q", got)
	}
}

func TestRegisterAndTokenOutput(t *testing.T) {
	f := registerFlags{identity: "bot-1", repository: "acme/widgets", remote: "origin", ttl: time.Minute, fencingEpoch: -1}
	wr := f.registration("fleet", "bot-1-01234567", "inst-0123456789abcdef",
		fleetv1alpha1.ProcessIdentity{HostID: "h", BootID: "b", PID: 42})
	name := func(w io.Writer, _ bool) error { _, err := io.WriteString(w, wr.Name+"\n"); return err }
	if got := render(t, "", wr, name); got != "bot-1-01234567\n" {
		t.Errorf("default output %q: register prints the name alone", got)
	}
	var back fleetv1alpha1.WorkerRegistration
	if err := yaml.Unmarshal([]byte(render(t, "yaml", wr, name)), &back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.ClientInstanceID != "inst-0123456789abcdef" || back.Spec.WorkerNamespace != "bot-1-01234567" ||
		back.Spec.SessionID != "inst-0123456789abcdef" || back.Spec.HeartbeatTTLSeconds != 60 || back.Spec.FencingEpoch != nil {
		t.Errorf("registration: %+v", back.Spec)
	}

	tr := &authenticationv1.TokenRequest{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Status: authenticationv1.TokenRequestStatus{Token: "eyJ.tok", ExpirationTimestamp: expires}}
	tok := func(w io.Writer, _ bool) error { _, err := io.WriteString(w, tr.Status.Token+"\n"); return err }
	if got := render(t, "", tr, tok); got != "eyJ.tok\n" {
		t.Errorf("token output %q", got)
	}
	if got := render(t, "json", tr, tok); !strings.Contains(got, `"token": "eyJ.tok"`) {
		t.Errorf("token json %q", got)
	}
}

func plannedPlan() *fleetv1alpha1.RetirementPlan {
	return &fleetv1alpha1.RetirementPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "plan-abcde", Namespace: "fleet", Generation: 1, ResourceVersion: "7", UID: "u-1"},
		Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: "origin", CanonicalRepository: "acme/widgets"},
		Status: fleetv1alpha1.RetirementPlanStatus{
			ObservedGeneration: 1, Outcome: fleetv1alpha1.OutcomePlanned, ReadOnly: true,
			Conditions:                []metav1.Condition{{Type: fleetv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Planned"}},
			RegistryFingerprint:       "sha256:" + strings.Repeat("1", 64),
			CandidateFingerprint:      "sha256:" + strings.Repeat("2", 64),
			CandidateWorkerIdentities: []string{"w-dead"},
			Candidates:                []fleetv1alpha1.WorkerAssessment{{WorkerIdentity: "w-dead", ReasonCode: "eligible_stale_orphan", Detail: "process gone", Evidence: map[string]string{"probe": "gone"}}},
			Preserved: []fleetv1alpha1.WorkerAssessment{
				{WorkerIdentity: "w-a", ReasonCode: "worker_live", Detail: "heartbeat fresh"},
				{WorkerIdentity: "w-b", ReasonCode: "worker_live", Detail: "heartbeat fresh"},
				{WorkerIdentity: "w-c", ReasonCode: "host_binding_unproven", Detail: "other host"},
			},
			PreservedReasonCounts: map[string]int32{"worker_live": 2, "host_binding_unproven": 1},
			AssessedCount:         4, CandidateCount: 1, PreservedCount: 3,
			Snapshot: &fleetv1alpha1.PostApply{LiveWorkerCount: 2, StaleWorkerCount: 2, LiveFleetSafe: true},
		},
	}
}

func TestPlanOutputGroupsPreservedRowsByReason(t *testing.T) {
	p := plannedPlan()
	human := func(w io.Writer, wide bool) error { return printPlan(w, p, wide) }
	got := render(t, "", p, human)
	for _, want := range []string{
		"Plan fleet/plan-abcde: planned; 4 assessed, 1 candidates, 3 preserved",
		"Candidates (1):", "w-dead", "Preserved (3):",
		"host_binding_unproven (1)", "worker_live (2)",
		"2 live, 2 stale, 0 historical; live fleet safe: true",
		"kubectl fleet approve plan-abcde -n fleet",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan output lacks %q:\n%s", want, got)
		}
	}
	// Groups are sorted by reason, and each row sits under its own reason.
	if i, j := strings.Index(got, "host_binding_unproven (1)"), strings.Index(got, "worker_live (2)"); i > j {
		t.Errorf("reasons out of order:\n%s", got)
	}
	if i, j := strings.Index(got, "worker_live (2)"), strings.Index(got, "w-a"); j < i {
		t.Errorf("w-a is not under worker_live:\n%s", got)
	}
	if strings.Contains(got, "probe=gone") {
		t.Errorf("default output shows evidence:\n%s", got)
	}
	if wide := render(t, "wide", p, human); !strings.Contains(wide, "probe=gone") {
		t.Errorf("wide output lacks the evidence:\n%s", wide)
	}
	if got := render(t, "jsonpath={.status.candidateCount}", p, human); got != "1" {
		t.Errorf("jsonpath %q", got)
	}
}

func TestApprovalFor(t *testing.T) {
	groups := []string{"system:authenticated", "ops"}
	a, err := approvalFor(plannedPlan(), fleetv1alpha1.ApprovalBindingCandidateSet, "alice", groups)
	if err != nil {
		t.Fatal(err)
	}
	if a.RegistryFingerprint != "" || a.CandidateFingerprint != "sha256:"+strings.Repeat("2", 64) ||
		strings.Join(a.WorkerIdentities, ",") != "w-dead" || a.ApprovedBy != "alice" || strings.Join(a.ApprovedGroups, ",") != "system:authenticated,ops" {
		t.Errorf("candidate-set approval: %+v", a)
	}
	a, err = approvalFor(plannedPlan(), fleetv1alpha1.ApprovalBindingRegistry, "alice", nil)
	if err != nil || a.RegistryFingerprint != "sha256:"+strings.Repeat("1", 64) {
		t.Errorf("registry approval: %+v, %v", a, err)
	}

	refused := map[string]func(p *fleetv1alpha1.RetirementPlan) (binding, user string){
		"not ready": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Status.Outcome = ""
			return "CandidateSet", "alice"
		},
		"stale generation": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Generation = 2
			return "CandidateSet", "alice"
		},
		"already approved": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Spec.Approval = &fleetv1alpha1.RetirementApproval{}
			return "CandidateSet", "alice"
		},
		"applied": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Status.Outcome = "applied"
			return "CandidateSet", "alice"
		},
		"no candidates": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Status.CandidateCount = 0
			return "CandidateSet", "alice"
		},
		"too many": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Status.CandidateCount = 2001
			return "CandidateSet", "alice"
		},
		"unknown binding":   func(*fleetv1alpha1.RetirementPlan) (string, string) { return "Everything", "alice" },
		"no approving user": func(*fleetv1alpha1.RetirementPlan) (string, string) { return "CandidateSet", "" },
		"ready false": func(p *fleetv1alpha1.RetirementPlan) (string, string) {
			p.Status.Conditions[0].Status = metav1.ConditionFalse
			return "CandidateSet", "alice"
		},
	}
	for name, mutate := range refused {
		p := plannedPlan()
		binding, user := mutate(p)
		if _, err := approvalFor(p, binding, user, nil); ExitCodeOf(err) != ExitUsage {
			t.Errorf("%s: %v (exit %d), want a usage error", name, err, ExitCodeOf(err))
		}
	}
}

func TestApprovalManifestIsReadyForGitOps(t *testing.T) {
	p := plannedPlan()
	a, err := approvalFor(p, fleetv1alpha1.ApprovalBindingCandidateSet, "alice", []string{"ops"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := approvalManifest(p, a)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, "", m, func(w io.Writer, _ bool) error { return printYAML(w, m.Object) })
	for _, bad := range []string{"status:", "resourceVersion", "uid:", "creationTimestamp: \"2"} {
		if strings.Contains(got, bad) {
			t.Errorf("manifest carries %q:\n%s", bad, got)
		}
	}
	var back fleetv1alpha1.RetirementPlan
	if err := yaml.UnmarshalStrict([]byte(got), &back); err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	if back.Kind != "RetirementPlan" || back.Name != "plan-abcde" || back.Namespace != "fleet" || back.Spec.Remote != "origin" ||
		back.Spec.CanonicalRepository != "acme/widgets" || back.Spec.Approval.ApprovedBy != "alice" || back.Spec.Approval.Binding != "CandidateSet" {
		t.Errorf("manifest:\n%s", got)
	}
	if js := render(t, "json", m, nil); !strings.Contains(js, `"approvedBy": "alice"`) {
		t.Errorf("json manifest:\n%s", js)
	}
}

func statusFixture() FleetStatus {
	hb := metav1.NewTime(expires.Add(-time.Minute))
	return FleetStatus{
		Namespace: "fleet", ObservedAt: expires, OpenClaims: 1,
		Snapshot: fleetv1alpha1.PostApply{LiveWorkerCount: 1, StaleWorkerCount: 1, HistoricalWorkerCount: 2, LiveFleetSafe: false, BlockerCount: 1,
			Blockers: []fleetv1alpha1.FleetBlocker{{Code: "legacy_incomplete_identity", WorkerIdentity: "w-old", Detail: "pid- instance id"}}},
		Workers: []WorkerRow{{Name: "w-a", Identity: "bot-a", Phase: "Active", OwnershipState: "live", PID: 7, Heartbeat: &hb}},
	}
}

func TestStatusOutput(t *testing.T) {
	st := statusFixture()
	obj, err := st.object()
	if err != nil {
		t.Fatal(err)
	}
	human := func(w io.Writer, wide bool) error { return printStatus(w, st, wide) }
	got := render(t, "", obj, human)
	for _, want := range []string{"LIVE-FLEET-SAFE", "fleet", "false", "legacy_incomplete_identity", "w-old"} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "bot-a") {
		t.Errorf("default status lists workers:\n%s", got)
	}
	if wide := render(t, "wide", obj, human); !strings.Contains(wide, "bot-a") || !strings.Contains(wide, "2026-12-01T11:59:00Z") {
		t.Errorf("wide status lacks the workers:\n%s", wide)
	}
	var back FleetStatus
	if err := json.Unmarshal([]byte(render(t, "json", obj, human)), &back); err != nil {
		t.Fatal(err)
	}
	if back.Snapshot.BlockerCount != 1 || back.Workers[0].PID != 7 || back.OpenClaims != 1 {
		t.Errorf("json status: %+v", back)
	}
	if got := render(t, "jsonpath={.snapshot.liveFleetSafe}", obj, human); got != "false" {
		t.Errorf("jsonpath %q", got)
	}
	if got := render(t, "yaml", obj, human); !strings.Contains(got, "kind: FleetStatus") {
		t.Errorf("yaml status:\n%s", got)
	}
}

func TestRefusalsAndExitCodes(t *testing.T) {
	want := map[claim.Class]int{
		claim.ClassContention: ExitContention, claim.ClassStaleState: ExitStaleState, claim.ClassEligibility: ExitEligibility,
		claim.ClassPolicy: ExitPolicy, claim.ClassAuthority: ExitAuthority,
	}
	seen := map[int]bool{ExitOK: true, ExitFailure: true, ExitUsage: true, ExitTimeout: true}
	for _, c := range claim.Classes() {
		code := ClassExitCode(c)
		if code != want[c] || seen[code] {
			t.Errorf("class %s: exit code %d (want %d, distinct from the others)", c, code, want[c])
		}
		seen[code] = true
		if !strings.Contains(exitCodeTable, string(c)) {
			t.Errorf("the documented table lacks class %s", c)
		}
	}
	if ClassExitCode("novel") != ExitFailure {
		t.Error("an unknown class must be a plain failure")
	}
	ref := &Refusal{Claim: "c1", Result: fleetv1alpha1.ClaimResult{Outcome: "not_acquired", Class: "contention", Blocker: "foreign_claimed",
		FailedPredicate: "target_claimed", RuleID: "TC030", Message: "The requested target is already claimed.", ContentionIsNormal: true, ReassessFromFreshState: true}}
	msg := ref.Error()
	for _, w := range []string{"claim c1 refused (contention, foreign_claimed)", "target_claimed", "TC030", "losing a race is normal", "inspect fresh state"} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal message lacks %q: %s", w, msg)
		}
	}
	if ref.ExitCode() != ExitContention {
		t.Errorf("exit code %d", ref.ExitCode())
	}
}

func TestProgressDrawsOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	quiet := &progress{w: &b}
	quiet.step("waiting")
	quiet.done()
	if b.Len() != 0 {
		t.Errorf("progress wrote %q while stdout is not a terminal", b.String())
	}
	loud := &progress{w: &b, on: true, start: time.Now()}
	loud.step("waiting for validation")
	if !strings.Contains(b.String(), "waiting for validation") {
		t.Errorf("progress line %q", b.String())
	}
	loud.done()
	if !strings.HasSuffix(b.String(), "\r\033[K") {
		t.Errorf("the line is not cleared: %q", b.String())
	}
	o := NewOptions(genericiooptions.NewTestIOStreamsDiscard())
	if o.progress().on {
		t.Error("a buffer is not a terminal")
	}
}
