// Package authz asks the API server's authorizer about fleet permissions with
// SubjectAccessReviews, so binding or unbinding a role takes effect at once.
package authz

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// ApproveVerb is the custom RBAC verb on retirementplans that lets a user approve a plan.
const ApproveVerb = "approve"

// Reviewer creates SubjectAccessReviews.
type Reviewer struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CanApprove reports whether user holds the approve verb on retirementplans in namespace.
// Service-account users get their implicit groups so group bindings are honoured.
func (r Reviewer) CanApprove(ctx context.Context, user, namespace string) (bool, string, error) {
	return r.allowed(ctx, user, namespace, ApproveVerb, "retirementplans")
}

// Verdict is the capability verdict a claim validation pins: claim.VerdictAllowed when
// system:serviceaccount:<namespace>:<worker> may create taskclaims in the namespace, and
// "denied" otherwise.
func (r Reviewer) Verdict(ctx context.Context, namespace, worker string) (string, error) {
	ok, _, err := r.allowed(ctx, "system:serviceaccount:"+namespace+":"+worker, namespace, "create", "taskclaims")
	if err != nil {
		return "", err
	}
	if ok {
		return claim.VerdictAllowed, nil
	}
	return "denied", nil
}

// allowed asks whether user may perform verb on resource (of this API group) in namespace.
func (r Reviewer) allowed(ctx context.Context, user, namespace, verb, resource string) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: implicitGroups(user),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace,
				Verb:      verb,
				Group:     fleetv1alpha1.GroupVersion.Group,
				Resource:  resource,
			},
		},
	}
	if err := r.Client.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("asking the authorizer whether %q may %s %s: %w", user, verb, resource, err)
	}
	reason := sar.Status.Reason
	if !sar.Status.Allowed && reason == "" {
		reason = fmt.Sprintf("user %q does not hold verb %q on %s in namespace %q", user, verb, resource, namespace)
	}
	return sar.Status.Allowed, reason, nil
}

// implicitGroups are the groups the API server adds to every request of user.
func implicitGroups(user string) []string {
	groups := []string{"system:authenticated"}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		}
	}
	return groups
}
