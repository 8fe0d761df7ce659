// Package authz asks the API server's authorizer about fleet permissions with
// SubjectAccessReviews, so binding or unbinding a role takes effect at once, and reads
// the facts the approval verdict needs: whether an approver is a worker, and whether the
// admission policy that guards approvals is installed as shipped.
package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// ApproveVerb is the custom RBAC verb on retirementplans that lets a user approve a plan.
const ApproveVerb = "approve"

// WorkerVerb is the custom RBAC verb on workerregistrations that only the fleet-worker
// ClusterRole grants: holding it marks a subject as a worker.
const WorkerVerb = "work"

// wildcardProbeVerb is a verb no role names: a subject that holds it on
// workerregistrations holds every verb there through a wildcard.
const wildcardProbeVerb = "fleet-wildcard-probe"

// Subject is a user as the API server authenticated it: its name and its groups.
type Subject struct {
	User   string
	Groups []string
}

// Reviewer creates SubjectAccessReviews and reads what the verdicts about approvers need.
type Reviewer struct {
	Client client.Client
	// Reader, when set, answers the reads (the guarding policy, registrations) straight
	// from the API server; otherwise Client does.
	Reader client.Reader
}

func (r Reviewer) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=get

// CanApprove reports whether the subject (exactly these groups, as admission saw them)
// holds the approve verb on retirementplans in namespace, with the authorizer's reason
// when it does not.
func (r Reviewer) CanApprove(ctx context.Context, s Subject, namespace string) (bool, string, error) {
	return r.allowed(ctx, s, namespace, ApproveVerb, "retirementplans")
}

// WorkerFacts gathers what tells whether the subject is a worker: for a ServiceAccount,
// whether a WorkerRegistration of its name exists in its namespace, and whether it holds
// the worker verb (in namespace or its own) other than through a wildcard. A user that
// is not a ServiceAccount needs no reads.
func (r Reviewer) WorkerFacts(ctx context.Context, s Subject, namespace string) (retirement.SubjectFacts, error) {
	f := retirement.SubjectFacts{User: s.User}
	saNamespace, name, ok := retirement.ServiceAccountOf(s.User)
	if !ok {
		return f, nil
	}
	wr := &fleetv1alpha1.WorkerRegistration{}
	switch err := r.reader().Get(ctx, client.ObjectKey{Namespace: saNamespace, Name: name}, wr); {
	case err == nil:
		f.HasRegistration = true
	case !apierrors.IsNotFound(err):
		return f, fmt.Errorf("looking for the WorkerRegistration of %s: %w", s.User, err)
	}
	f.HoldsEveryVerb = true
	for _, ns := range slices.Compact([]string{namespace, saNamespace}) {
		work, _, err := r.allowed(ctx, s, ns, WorkerVerb, "workerregistrations")
		if err != nil {
			return f, err
		}
		if !work {
			continue
		}
		every, _, err := r.allowed(ctx, s, ns, wildcardProbeVerb, "workerregistrations")
		if err != nil {
			return f, err
		}
		f.HoldsWorkerVerb = true
		f.HoldsEveryVerb = f.HoldsEveryVerb && every
	}
	f.HoldsEveryVerb = f.HoldsWorkerVerb && f.HoldsEveryVerb
	return f, nil
}

// Verdict is the capability verdict a claim validation pins: claim.VerdictAllowed when
// system:serviceaccount:<namespace>:<worker> may create taskclaims in the namespace, and
// "denied" otherwise.
func (r Reviewer) Verdict(ctx context.Context, namespace, worker string) (string, error) {
	user := "system:serviceaccount:" + namespace + ":" + worker
	ok, _, err := r.allowed(ctx, Subject{User: user, Groups: implicitGroups(user)}, namespace, "create", "taskclaims")
	if err != nil {
		return "", err
	}
	if ok {
		return claim.VerdictAllowed, nil
	}
	return "denied", nil
}

// allowed asks whether the subject may perform verb on resource (of this API group) in
// namespace.
func (r Reviewer) allowed(ctx context.Context, s Subject, namespace, verb, resource string) (bool, string, error) {
	user := s.User
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: s.Groups,
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
		reason = fmt.Sprintf("user %q (groups %v) does not hold verb %q on %s in namespace %q", user, s.Groups, verb, resource, namespace)
	}
	return sar.Status.Allowed, reason, nil
}

// implicitGroups are the groups the API server adds to every request of user (for the
// claim verdict, which knows a worker by name only).
func implicitGroups(user string) []string {
	groups := []string{"system:authenticated"}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		}
	}
	return groups
}
