package testenv

import (
	"context"
	"io"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/giteatools/fleet-controller/internal/retirement"
)

// StartSuite is the boot every controller suite shares: controller-runtime's log goes to
// log (GinkgoWriter), the control plane starts (Start) with the project's RBAC and
// admission manifests installed (InstallManifests), and ctx is the context the suite's
// managers run in. Stop cancels ctx, then stops the control plane. The Env is returned
// even when the start failed half-way, so that the suite's AfterSuite can Stop it.
func StartSuite(log io.Writer) (*Env, context.Context, error) {
	SetLogger(log)
	ctx, cancel := context.WithCancel(context.Background())
	e, err := Start()
	if e == nil {
		e = &Env{}
	}
	e.cancel = cancel
	if err != nil {
		return e, ctx, err
	}
	return e, ctx, e.InstallManifests(ctx)
}

// AllowApprovals binds user cluster-wide to the fleet-retirement-approver ClusterRole
// (shipped unbound: a GitOps tool's identity is bound to it), after waiting until plans
// created from now on are ones whose approvals the controller honours: only those created
// a little after the guarding admission policy was last written
// (retirement.ApprovalGuardSettle). Call it after InstallManifests (StartSuite).
func (e *Env) AllowApprovals(ctx context.Context, user string) error {
	select {
	case <-time.After(retirement.ApprovalGuardSettle + time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-" + user + "-approver"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-retirement-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
}
