package controllers_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/manifests"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// testHostID stands in for /etc/machine-id so the suite does not depend on the machine
// having one; the boot id and /proc are the machine's real ones.
const testHostID = "fleet-test-host"

const canonicalRepo = "acme/widgets"

// gitopsUser is the identity that applies approvals in these tests.
const gitopsUser = "gitops"

const unclassifiedLabel = "fleet-test/unclassified"

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client // cacheless: assertions read the API server directly
	scheme    = runtime.NewScheme()
	ctx       context.Context
	cancel    context.CancelFunc
	prober    *liveness.ProcProber
	host      retirement.Host
	mgrPlans  *controllers.RetirementPlanReconciler
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers suite (envtest: real kube-apiserver and etcd)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(fleetv1alpha1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "envtest needs KUBEBUILDER_ASSETS: run `make test`")
	k8sClient, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	installManifests("../config/admission", "../config/rbac")
	// The GitOps tool's identity: bound cluster-wide to the (otherwise unbound) approver role.
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-gitops-approver"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-retirement-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: gitopsUser}},
	})).To(Succeed())

	facts, _ := liveness.ReadHostFacts("")
	Expect(facts.BootID).NotTo(BeEmpty(), "the suite needs /proc/sys/kernel/random/boot_id")
	facts.HostID = testHostID
	prober = &liveness.ProcProber{Facts: facts}
	host = retirement.Host{HostID: facts.HostID, BootID: facts.BootID}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	// Registrations labelled unclassifiedLabel are left alone so a test can store an
	// ownership state by hand.
	classified := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[unclassifiedLabel] == "" })
	Expect(ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.WorkerRegistration{}, builder.WithPredicates(classified)).
		Named("workerregistration").
		Complete(&controllers.WorkerRegistrationReconciler{
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
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newPlanReconciler wires a RetirementPlanReconciler against the real API server.
func newPlanReconciler(c client.Client, reader client.Reader, p liveness.Prober) *controllers.RetirementPlanReconciler {
	r := &controllers.RetirementPlanReconciler{
		Client:     c,
		APIReader:  reader,
		Host:       host,
		Repository: canonicalRepo,
		Approvers:  controllers.SubjectAccessReviewChecker{Client: c},
		Clock:      clock.RealClock{},
		Recorder:   discardRecorder{},
	}
	if p != nil {
		r.Prober, r.Reprober = p, p
	}
	return r
}

// installManifests creates the objects of the project's plain resource folders, except
// the namespaced deployment objects of fleet-system.
func installManifests(dirs ...string) {
	GinkgoHelper()
	Expect(manifests.Create(ctx, k8sClient, notDeployment, dirs...)).To(Succeed())
}

func notDeployment(u *unstructured.Unstructured) (bool, error) {
	switch u.GetKind() {
	case "ServiceAccount", "RoleBinding", "Role":
		return false, nil
	}
	return true, nil
}

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// newNamespace creates a namespace of its own for one test: plans cover a namespace.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniq("fleet-test")}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// child starts a real process (sleep) and returns it with its start time.
type child struct {
	cmd       *exec.Cmd
	pid       int64
	startTime int64
}

func startChild() *child {
	GinkgoHelper()
	cmd := exec.Command("sleep", "600")
	Expect(cmd.Start()).To(Succeed())
	pid := int64(cmd.Process.Pid)
	st, err := liveness.ProcessStartTime("", pid)
	Expect(err).NotTo(HaveOccurred())
	c := &child{cmd: cmd, pid: pid, startTime: st}
	DeferCleanup(func() { c.kill() })
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// deadChild returns the pid and start time of a process that has exited.
func deadChild() *child {
	GinkgoHelper()
	c := startChild()
	c.kill()
	return c
}

type regOpt func(*fleetv1alpha1.WorkerRegistration)

// register creates a registration for process c on this host, sets its heartbeat to
// heartbeatAge ago, and waits until the controller has classified it as want.
func register(ns, name string, c *child, heartbeatAge time.Duration, want string, opts ...regOpt) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	st := c.startTime
	wr := &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{
			ClientInstanceID:    "inst-" + name,
			WorkerNamespace:     "slot-" + name,
			Identity:            "bot-" + name,
			Remote:              "origin",
			Repository:          canonicalRepo,
			HeartbeatTTLSeconds: 60,
			Process:             fleetv1alpha1.ProcessIdentity{HostID: host.HostID, BootID: host.BootID, PID: c.pid, StartTime: &st},
			GenerationID:        "gen-" + name,
			SessionID:           "sess-" + name,
		},
	}
	for _, o := range opts {
		o(wr)
	}
	Expect(k8sClient.Create(ctx, wr)).To(Succeed())
	heartbeat(wr, heartbeatAge)
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), wr)).To(Succeed())
		g.Expect(wr.Status.ObservedGeneration).To(Equal(wr.Generation))
		g.Expect(wr.Status.Phase).To(Equal(fleetv1alpha1.PhaseActive))
		g.Expect(wr.Status.OwnershipState).To(Equal(want))
	}).Should(Succeed())
	return wr
}

// heartbeat renews the registration's heartbeat (as the worker would), age ago.
func heartbeat(wr *fleetv1alpha1.WorkerRegistration, age time.Duration) {
	GinkgoHelper()
	hb := metav1.NewTime(time.Now().Add(-age).Truncate(time.Second))
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), wr)).To(Succeed())
		if old := wr.Status.LastHeartbeatAt; old != nil && !hb.After(old.Time) && age == 0 {
			hb = metav1.NewTime(old.Add(time.Second)) // a renewal always moves the stamp
		}
		wr.Status.LastHeartbeatAt = &hb
		g.Expect(k8sClient.Status().Update(ctx, wr)).To(Succeed())
	}).Should(Succeed())
}
