package authz

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/giteatools/fleet-controller/internal/manifests"
)

// asServed is the shipped pair as the API server returns it: defaults filled in,
// created at created.
func asServed(t *testing.T, created time.Time) Shipped {
	t.Helper()
	s, err := ShippedApprovalGuard()
	if err != nil {
		t.Fatal(err)
	}
	p, b := s.Policy.DeepCopy(), s.Binding.DeepCopy()
	p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
	p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
	p.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionv1.Equivalent)
	for i := range p.Spec.MatchConstraints.ResourceRules {
		p.Spec.MatchConstraints.ResourceRules[i].Scope = ptr.To(admissionv1.AllScopes)
	}
	at := metav1.NewTime(created)
	later := metav1.NewTime(created.Add(time.Hour))
	p.CreationTimestamp, b.CreationTimestamp = at, at
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &at},
		{Manager: "kube-apiserver", Subresource: "status", Time: &later}} // type checking, not a spec write
	return Shipped{Policy: p, Binding: b}
}

func TestCompareGuard(t *testing.T) {
	shipped, err := ShippedApprovalGuard()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name            string
		alter           func(p *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding)
		policy, binding bool
		differs         string
	}{
		{"as served: equal", nil, true, true, ""},
		{"failurePolicy Ignore", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.FailurePolicy = ptr.To(admissionv1.Ignore)
		}, true, true, "policy failurePolicy"},
		{"a validation dropped", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Validations = p.Spec.Validations[:1]
		}, true, true, "policy validations"},
		{"an expression weakened", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Validations[1].Expression = "true"
		}, true, true, "policy validations"},
		{"a match condition that never matches", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConditions[0].Expression = "false"
		}, true, true, "policy matchConditions"},
		{"an object selector", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"never": "x"}}
		}, true, true, "policy matchConstraints"},
		{"CREATE only", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionv1.OperationType{admissionv1.Create}
		}, true, true, "policy matchConstraints"},
		{"audit annotations do not matter", func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.AuditAnnotations = []admissionv1.AuditAnnotation{{Key: "who", ValueExpression: "request.userInfo.username"}}
		}, true, true, ""},
		{"binding warns only", func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		}, true, true, "binding validationActions"},
		{"binding denies and audits", func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = append(b.Spec.ValidationActions, admissionv1.Audit)
		}, true, true, "binding validationActions"},
		{"binding of another policy", func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.PolicyName = "something-else"
		}, true, true, "binding policyName"},
		{"binding narrowed to no namespace", func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"none": "x"}}}
		}, true, true, "binding matchResources"},
		{"binding with empty matchResources, as defaulted", func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
				MatchPolicy: ptr.To(admissionv1.Equivalent)}
		}, true, true, ""},
		{"no policy", nil, false, true, ""},
		{"no binding", nil, true, false, ""},
	}
	for _, tt := range tests {
		live := asServed(t, created)
		if tt.alter != nil {
			tt.alter(live.Policy, live.Binding)
		}
		if !tt.policy {
			live.Policy = nil
		}
		if !tt.binding {
			live.Binding = nil
		}
		g := CompareGuard(shipped, live.Policy, live.Binding)
		if g.PolicyFound != tt.policy || g.BindingFound != tt.binding {
			t.Errorf("%s: found policy %v, binding %v", tt.name, g.PolicyFound, g.BindingFound)
		}
		joined := strings.Join(g.Differences, "; ")
		if (tt.differs == "") != (joined == "") || !strings.Contains(joined, tt.differs) {
			t.Errorf("%s: differences %q, want %q", tt.name, joined, tt.differs)
		}
		if !g.LastWritten.Equal(created) {
			t.Errorf("%s: LastWritten %v, want the creation %v (status writes do not count)", tt.name, g.LastWritten, created)
		}
	}
}

func TestCompareGuardLastWrittenIsTheLatestSpecWrite(t *testing.T) {
	shipped, err := ShippedApprovalGuard()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	live := asServed(t, created)
	edited := metav1.NewTime(created.Add(30 * time.Minute))
	live.Binding.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Time: &edited}}
	if g := CompareGuard(shipped, live.Policy, live.Binding); !g.LastWritten.Equal(edited.Time) {
		t.Errorf("LastWritten = %v, want the binding's edit %v", g.LastWritten, edited)
	}
}

// The embedded manifest is the one config/admission ships, and it carries the checks
// that make approvedBy and approvedGroups what admission saw.
func TestShippedApprovalGuardIsConfigAdmission(t *testing.T) {
	s, err := ShippedApprovalGuard()
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy.Name != ApprovalPolicyName || s.Binding.Name != ApprovalPolicyName || s.Binding.Spec.PolicyName != ApprovalPolicyName {
		t.Fatalf("shipped names: policy %q, binding %q -> %q", s.Policy.Name, s.Binding.Name, s.Binding.Spec.PolicyName)
	}
	objs, err := manifests.Objects(filepath.Join("..", "..", "config", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, u := range objs {
		if u.GetName() != ApprovalPolicyName {
			continue
		}
		found++
		var target any = &admissionv1.ValidatingAdmissionPolicy{}
		want := any(s.Policy)
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			target, want = &admissionv1.ValidatingAdmissionPolicyBinding{}, s.Binding
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
			t.Fatal(err)
		}
		if !equalJSON(t, target, want) {
			t.Errorf("%s in config/admission differs from the embedded one", u.GetKind())
		}
	}
	if found != 2 {
		t.Errorf("config/admission has %d objects named %s, want the policy and its binding", found, ApprovalPolicyName)
	}
	var exprs []string
	for _, v := range s.Policy.Spec.Validations {
		exprs = append(exprs, v.Expression)
	}
	all := strings.Join(exprs, "\n")
	for _, must := range []string{"check('approve')", "approvedBy == request.userInfo.username", "approvedGroups", "request.userInfo.?groups"} {
		if !strings.Contains(all, must) {
			t.Errorf("the shipped validations lack %q", must)
		}
	}
	if !slices.Equal(s.Binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding actions %v", s.Binding.Spec.ValidationActions)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ua, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	ub, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	return toString(ua) == toString(ub)
}

func toString(m map[string]any) string {
	b, _ := runtimeJSON(m)
	return string(b)
}

// Only the fleet-worker ClusterRole grants the worker verb, and no shipped role names
// the wildcard probe verb.
func TestOnlyTheWorkerRoleGrantsTheWorkerVerb(t *testing.T) {
	objs, err := manifests.Objects(filepath.Join("..", "..", "config", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	grants := map[string]bool{}
	for _, u := range objs {
		rules, _, _ := unstructuredRules(u.Object)
		for _, r := range rules {
			if slices.Contains(r.verbs, wildcardProbeVerb) || slices.Contains(r.verbs, "*") {
				t.Errorf("%s %s names %v", u.GetKind(), u.GetName(), r.verbs)
			}
			if slices.Contains(r.verbs, WorkerVerb) {
				grants[u.GetName()] = true
			}
		}
	}
	if len(grants) != 1 || !grants["fleet-worker"] {
		t.Errorf("roles granting %q: %v, want fleet-worker alone", WorkerVerb, grants)
	}
}
