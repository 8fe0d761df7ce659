package controllers

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// ApproveVerb is the custom RBAC verb on retirementplans that lets a user approve a plan.
const ApproveVerb = "approve"

// ApproverChecker answers whether a user may approve RetirementPlans in a namespace.
type ApproverChecker interface {
	CanApprove(ctx context.Context, user, namespace string) (allowed bool, reason string, err error)
}

// SubjectAccessReviewChecker asks the API server's authorizer with a SubjectAccessReview,
// so RBAC changes (binding or unbinding the approver role) take effect at once.
type SubjectAccessReviewChecker struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CanApprove reports whether user holds the approve verb on retirementplans in namespace.
// Service-account users get their implicit groups so group bindings are honoured.
func (c SubjectAccessReviewChecker) CanApprove(ctx context.Context, user, namespace string) (bool, string, error) {
	return sarAllowed(ctx, c.Client, user, namespace, ApproveVerb, "retirementplans")
}

// sarAllowed asks the authorizer whether user may perform verb on resource (of this API
// group) in namespace.
func sarAllowed(ctx context.Context, c client.Client, user, namespace, verb, resource string) (bool, string, error) {
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
	if err := c.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("asking the authorizer whether %q may %s %s: %w", user, verb, resource, err)
	}
	reason := sar.Status.Reason
	if !sar.Status.Allowed && reason == "" {
		reason = fmt.Sprintf("user %q does not hold verb %q on %s in namespace %q", user, verb, resource, namespace)
	}
	return sar.Status.Allowed, reason, nil
}

func implicitGroups(user string) []string {
	groups := []string{"system:authenticated"}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		}
	}
	return groups
}
