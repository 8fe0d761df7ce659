package authz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/config/admission"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// ApprovalPolicyName is the name of the ValidatingAdmissionPolicy that guards approvals,
// and of its binding.
const ApprovalPolicyName = "fleet-retirementplan-approval"

// Shipped is the guarding policy and binding as the controller ships them.
type Shipped struct {
	Policy  *admissionv1.ValidatingAdmissionPolicy
	Binding *admissionv1.ValidatingAdmissionPolicyBinding
}

// ShippedApprovalGuard decodes the manifest embedded in the binary
// (config/admission/retirementplan_approval.yaml).
func ShippedApprovalGuard() (Shipped, error) {
	return decodeGuard(admission.RetirementPlanApproval)
}

func decodeGuard(manifest []byte) (Shipped, error) {
	var s Shipped
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return s, fmt.Errorf("decoding the shipped approval policy: %w", err)
		}
		var target any
		switch u.GetKind() {
		case "ValidatingAdmissionPolicy":
			s.Policy = &admissionv1.ValidatingAdmissionPolicy{}
			target = s.Policy
		case "ValidatingAdmissionPolicyBinding":
			s.Binding = &admissionv1.ValidatingAdmissionPolicyBinding{}
			target = s.Binding
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
			return s, fmt.Errorf("decoding the shipped %s: %w", u.GetKind(), err)
		}
	}
	if s.Policy == nil || s.Binding == nil {
		return s, errors.New("the shipped approval manifest lacks the policy or its binding")
	}
	return s, nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch

// ApprovalGuard reads the live policy and binding that guard approvals and compares them
// with the shipped ones. Reads go to Reader when set (straight to the API server).
func (r Reviewer) ApprovalGuard(ctx context.Context) (retirement.ApprovalGuard, error) {
	shipped, err := ShippedApprovalGuard()
	if err != nil {
		return retirement.ApprovalGuard{}, err
	}
	reader := r.reader()
	var g retirement.ApprovalGuard
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	switch err := reader.Get(ctx, client.ObjectKey{Name: shipped.Policy.Name}, policy); {
	case apierrors.IsNotFound(err):
		policy = nil
	case err != nil:
		return g, fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", shipped.Policy.Name, err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	switch err := reader.Get(ctx, client.ObjectKey{Name: shipped.Binding.Name}, binding); {
	case apierrors.IsNotFound(err):
		binding = nil
	case err != nil:
		return g, fmt.Errorf("reading ValidatingAdmissionPolicyBinding %s: %w", shipped.Binding.Name, err)
	}
	return CompareGuard(shipped, policy, binding), nil
}

// CompareGuard tells how the live policy and binding (nil when absent) compare with the
// shipped ones. Defaults the API server fills in count as equal to leaving them out;
// audit annotations are ignored (they never allow anything). Every other field of the
// policy's and the binding's spec must be the shipped one, expressions byte for byte.
func CompareGuard(shipped Shipped, policy *admissionv1.ValidatingAdmissionPolicy, binding *admissionv1.ValidatingAdmissionPolicyBinding) retirement.ApprovalGuard {
	g := retirement.ApprovalGuard{PolicyFound: policy != nil, BindingFound: binding != nil}
	if policy != nil {
		g.Differences = append(g.Differences, policyDifferences(shipped.Policy.Spec, policy.Spec)...)
		g.LastWritten = lastWritten(policy.ObjectMeta, g.LastWritten)
	}
	if binding != nil {
		g.Differences = append(g.Differences, bindingDifferences(shipped.Binding.Spec, binding.Spec)...)
		g.LastWritten = lastWritten(binding.ObjectMeta, g.LastWritten)
	}
	return g
}

func policyDifferences(want, got admissionv1.ValidatingAdmissionPolicySpec) []string {
	want, got = normalPolicy(want), normalPolicy(got)
	var out []string
	diff := func(field string, w, g any) {
		if !equality.Semantic.DeepEqual(w, g) {
			out = append(out, "policy "+field+" differs")
		}
	}
	diff("failurePolicy", want.FailurePolicy, got.FailurePolicy)
	diff("paramKind", want.ParamKind, got.ParamKind)
	diff("matchConstraints", want.MatchConstraints, got.MatchConstraints)
	diff("matchConditions", want.MatchConditions, got.MatchConditions)
	diff("variables", want.Variables, got.Variables)
	diff("validations", want.Validations, got.Validations)
	return out
}

func bindingDifferences(want, got admissionv1.ValidatingAdmissionPolicyBindingSpec) []string {
	var out []string
	if got.PolicyName != want.PolicyName {
		out = append(out, fmt.Sprintf("binding policyName is %q", got.PolicyName))
	}
	if !equality.Semantic.DeepEqual(want.ParamRef, got.ParamRef) {
		out = append(out, "binding paramRef differs")
	}
	if !equality.Semantic.DeepEqual(normalMatch(want.MatchResources), normalMatch(got.MatchResources)) {
		out = append(out, "binding matchResources differs")
	}
	w, g := slices.Clone(want.ValidationActions), slices.Clone(got.ValidationActions)
	slices.Sort(w)
	slices.Sort(g)
	if !slices.Equal(slices.Compact(w), slices.Compact(g)) {
		out = append(out, fmt.Sprintf("binding validationActions are %v", got.ValidationActions))
	}
	return out
}

// normalPolicy fills in what the API server defaults, so a live object compares equal to
// the manifest it was created from.
func normalPolicy(s admissionv1.ValidatingAdmissionPolicySpec) admissionv1.ValidatingAdmissionPolicySpec {
	s = *s.DeepCopy()
	if s.FailurePolicy == nil {
		s.FailurePolicy = ptr.To(admissionv1.Fail)
	}
	s.MatchConstraints = normalMatch(s.MatchConstraints)
	s.AuditAnnotations = nil
	return s
}

func normalMatch(m *admissionv1.MatchResources) *admissionv1.MatchResources {
	if m == nil {
		m = &admissionv1.MatchResources{}
	}
	m = m.DeepCopy()
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionv1.Equivalent)
	}
	for _, rules := range [][]admissionv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionv1.AllScopes)
			}
		}
	}
	return m
}

// lastWritten is the later of since and the object's last creation or spec write (the
// times of its managedFields entries, the status subresource aside: the API server
// writes a policy's type-checking status itself).
func lastWritten(m metav1.ObjectMeta, since time.Time) time.Time {
	latest := since
	if m.CreationTimestamp.After(latest) {
		latest = m.CreationTimestamp.Time
	}
	for _, f := range m.ManagedFields {
		if f.Subresource == "" && f.Time != nil && f.Time.After(latest) {
			latest = f.Time.Time
		}
	}
	return latest
}
