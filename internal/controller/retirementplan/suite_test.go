package retirementplan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/controller/retirementplan"
	"github.com/giteatools/fleet-controller/internal/controller/workerregistration"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// testHostID stands in for /etc/machine-id so the suite does not depend on the machine
// having one; the boot id and /proc are the machine's real ones.
const testHostID = "fleet-test-host"

const canonicalRepo = "acme/widgets"

// gitopsUser is the identity that applies approvals in these tests.
const gitopsUser = "gitops"

// Registrations labelled unclassifiedLabel are left alone by the WorkerRegistration
// reconciler, so a test can store an ownership state by hand.
const unclassifiedLabel = "fleet-test/unclassified"

var (
	env       *testenv.Env
	k8sClient client.Client // cacheless: assertions read the API server directly
	ctx       context.Context
	cancel    context.CancelFunc
	prober    *liveness.ProcProber
	host      retirement.Host
	fleet     testworker.Fleet
	mgrPlans  *retirementplan.Reconciler
)

func TestRetirementPlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "RetirementPlan suite (envtest: real kube-apiserver and etcd)")
}

var _ = BeforeSuite(func() {
	testenv.SetLogger(GinkgoWriter)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	Expect(env.InstallManifests(ctx)).To(Succeed())
	// The controller honours only approvals of plans created a little after the guarding
	// admission policy was last written (retirement.ApprovalGuardSettle).
	time.Sleep(retirement.ApprovalGuardSettle + time.Second)
	// The GitOps tool's identity: bound cluster-wide to the (otherwise unbound) approver role.
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-gitops-approver"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-retirement-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: gitopsUser}},
	})).To(Succeed())

	facts, err := testenv.HostFacts(testHostID)
	Expect(err).NotTo(HaveOccurred())
	prober = &liveness.ProcProber{Facts: facts}
	host = retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime}
	fleet = testworker.Fleet{Client: k8sClient, Host: host, Repository: canonicalRepo}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	// Plans rest on the ownership state the WorkerRegistration reconciler computes, so it
	// runs here too (wired by hand to skip unclassifiedLabel rows).
	classified := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[unclassifiedLabel] == "" })
	Expect(ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.WorkerRegistration{}, builder.WithPredicates(classified)).
		Named("workerregistration").
		Complete(&workerregistration.Reconciler{
			Client: mgr.GetClient(), Prober: prober, Clock: clock.RealClock{},
			Recorder: mgr.GetEventRecorder("workerregistration-controller"),
		})).To(Succeed())

	// The manager's RetirementPlan controller handles every plan except those named
	// "direct-*", which tests reconcile by hand with specially wired reconcilers.
	mgrPlans = newPlanReconciler(mgr.GetClient(), mgr.GetAPIReader(), prober)
	mgrPlans.Recorder = mgr.GetEventRecorder("retirementplan-controller")
	notDirect := predicate.NewPredicateFuncs(func(o client.Object) bool { return !strings.HasPrefix(o.GetName(), "direct-") })
	Expect(ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, notDirect)).
		Named("retirementplan").
		Complete(mgrPlans)).To(Succeed())

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	Expect(env.Stop()).To(Succeed())
})

// newPlanReconciler wires a RetirementPlan reconciler against the real API server: c
// writes, reader is the authoritative reader (also of the workflow fence).
func newPlanReconciler(c client.Client, reader client.Reader, p liveness.Prober) *retirementplan.Reconciler {
	r := &retirementplan.Reconciler{
		Client:     c,
		APIReader:  reader,
		Host:       host,
		Repository: canonicalRepo,
		Approvers:  authz.Reviewer{Client: c, Reader: reader},
		Fence:      workflowfence.Fence{Client: c, Reader: reader, Clock: clock.RealClock{}},
		Clock:      clock.RealClock{},
		Recorder:   testenv.Discard,
	}
	if p != nil {
		r.Prober, r.Reprober = p, p
	}
	return r
}
