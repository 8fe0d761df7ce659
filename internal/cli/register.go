package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/liveness"
)

// WorkerRoleName is the ClusterRole of neutral entry (config/rbac/fleet_worker_role.yaml).
const WorkerRoleName = "fleet-worker"

// registerFlags are what a registration is made of.
type registerFlags struct {
	name            string
	identity        string
	repository      string
	remote          string
	workerNamespace string
	ttl             time.Duration
	pid             int64
	hostID          string
	generationID    string
	sessionID       string
	fencingEpoch    int64
	codeRevision    string
	serviceAccount  bool
}

func (f *registerFlags) add(cmd *cobra.Command, withPID bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "Name of the WorkerRegistration and its ServiceAccount (default: <identity>-<8 hex digits>).")
	fl.StringVar(&f.identity, "identity", "", "Gitea login the worker acts as (required).")
	fl.StringVar(&f.repository, "repository", "", "Canonical owner/name repository the worker is bound to (required).")
	fl.StringVar(&f.remote, "remote", "origin", "Gitea remote the worker uses.")
	fl.StringVar(&f.workerNamespace, "worker-namespace", "", "The worker's control-plane slot (default: the registration name).")
	fl.DurationVar(&f.ttl, "ttl", time.Minute, "How long one heartbeat stays valid (whole seconds, at most 720h).")
	if withPID {
		fl.Int64Var(&f.pid, "pid", 0, "Process to register (default: the process that called kubectl fleet).")
	}
	fl.StringVar(&f.hostID, "host-id", "", "This host's machine id (default: read /etc/machine-id).")
	fl.StringVar(&f.generationID, "generation-id", "", "Worker generation that owns the row (fencing).")
	fl.StringVar(&f.sessionID, "session-id", "", "Worker session (fencing; default: the instance id).")
	fl.Int64Var(&f.fencingEpoch, "fencing-epoch", -1, "Fencing number of the worker slot (unset when negative).")
	fl.StringVar(&f.codeRevision, "code-revision", "", "Source revision of the worker's code (informational).")
	fl.BoolVar(&f.serviceAccount, "service-account", true, "Also create the worker's ServiceAccount and bind it to the fleet-worker ClusterRole, where permitted.")
}

var dnsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// check validates the flags before anything is read or written.
func (f *registerFlags) check() error {
	switch {
	case f.identity == "":
		return usageErrorf("--identity is required: the Gitea login the worker acts as")
	case f.repository == "":
		return usageErrorf("--repository is required: the owner/name repository the worker works on")
	case !repoPattern.MatchString(f.repository):
		return usageErrorf("--repository %q is not owner/name", f.repository)
	case f.remote == "":
		return usageErrorf("--remote must not be empty")
	case f.ttl < time.Second || f.ttl%time.Second != 0 || f.ttl > 720*time.Hour:
		return usageErrorf("--ttl %s must be whole seconds between 1s and 720h", f.ttl)
	case f.pid < 0:
		return usageErrorf("--pid %d is not a process id", f.pid)
	}
	if f.name != "" {
		if errs := validation.IsDNS1123Subdomain(f.name); len(errs) > 0 {
			return usageErrorf("--name %q: %s", f.name, strings.Join(errs, "; "))
		}
	}
	return nil
}

var repoPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// newInstanceID mints a launcher instance id, "inst-" and 16 hex digits.
func newInstanceID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "inst-" + hex.EncodeToString(b)
}

// defaultName derives a registration name from the identity and the instance id.
func defaultName(identity, instanceID string) string {
	base := strings.Trim(dnsUnsafe.ReplaceAllString(strings.ToLower(identity), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	if base == "" {
		base = "worker"
	}
	return base + "-" + strings.TrimPrefix(instanceID, "inst-")[:8]
}

// processFacts reads what pins a registration to one process: host and boot from
// internal/liveness, and the start time of pid (field 22 of /proc/<pid>/stat).
func (o *Options) processFacts(pid int64, hostID string) (fleetv1alpha1.ProcessIdentity, error) {
	start, err := liveness.ProcessStartTime(o.ProcRoot, pid)
	if errors.Is(err, fs.ErrNotExist) {
		return fleetv1alpha1.ProcessIdentity{}, usageErrorf("process %d does not exist on this host", pid)
	}
	if err != nil {
		return fleetv1alpha1.ProcessIdentity{}, fmt.Errorf("reading the start time of process %d: %w", pid, err)
	}
	pod, err := o.podOf(pid)
	if err != nil {
		return fleetv1alpha1.ProcessIdentity{}, err
	}
	facts, ferr := liveness.ReadHostFacts(o.ProcRoot)
	if hostID != "" {
		facts.HostID = hostID
	}
	if facts.HostID == "" || facts.BootID == "" {
		// A row without host or boot can never be proven gone: refuse rather than
		// register a worker whose retirement would be impossible.
		if pod != nil {
			return fleetv1alpha1.ProcessIdentity{}, fmt.Errorf("the node's machine id or boot id is unknown (%v): mount the node's /etc/machine-id into the pod, or pass --host-id", ferr)
		}
		return fleetv1alpha1.ProcessIdentity{}, fmt.Errorf("this host's machine id or boot id is unknown (%v); pass --host-id", ferr)
	}
	return fleetv1alpha1.ProcessIdentity{HostID: facts.HostID, BootID: facts.BootID, PID: pid, StartTime: ptr.To(start), Pod: pod}, nil
}

// registration builds the WorkerRegistration for process p.
func (f *registerFlags) registration(ns, name, instanceID string, p fleetv1alpha1.ProcessIdentity) *fleetv1alpha1.WorkerRegistration {
	slot := f.workerNamespace
	if slot == "" {
		slot = name
	}
	session := f.sessionID
	if session == "" {
		session = instanceID
	}
	wr := &fleetv1alpha1.WorkerRegistration{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "WorkerRegistration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{
			ClientInstanceID:    instanceID,
			WorkerNamespace:     slot,
			Identity:            f.identity,
			Remote:              f.remote,
			Repository:          f.repository,
			HeartbeatTTLSeconds: int64(f.ttl / time.Second),
			Process:             p,
			GenerationID:        f.generationID,
			SessionID:           session,
			Revisions:           fleetv1alpha1.Revisions{Code: f.codeRevision},
		},
	}
	if f.fencingEpoch >= 0 {
		wr.Spec.FencingEpoch = ptr.To(f.fencingEpoch)
	}
	return wr
}

// register creates the registration (and, where permitted, its ServiceAccount and
// RoleBinding) and renews its first heartbeat. warn receives what was not permitted.
func (o *Options) register(ctx context.Context, c client.Client, wr *fleetv1alpha1.WorkerRegistration, withSA bool, warn io.Writer) error {
	if err := c.Create(ctx, wr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return usageErrorf("a WorkerRegistration %s/%s already exists: a new process registers under a new name", wr.Namespace, wr.Name)
		}
		return fmt.Errorf("creating WorkerRegistration %s/%s: %w", wr.Namespace, wr.Name, err)
	}
	if withSA {
		o.ensureServiceAccount(ctx, c, wr.Namespace, wr.Name, warn)
	}
	if err := o.heartbeat(ctx, c, client.ObjectKeyFromObject(wr)); err != nil {
		return fmt.Errorf("first heartbeat of %s: %w", wr.Name, err)
	}
	return nil
}

// ensureServiceAccount creates the worker's ServiceAccount and its fleet-worker
// RoleBinding. Neither is required to register (an operator may provision them), so
// a refusal is a warning.
func (o *Options) ensureServiceAccount(ctx context.Context, c client.Client, ns, name string, warn io.Writer) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		fmt.Fprintf(warn, "warning: ServiceAccount %s/%s not created (%v); an operator must provide it before the worker can claim\n", ns, name, reasonOf(err))
		return
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerRoleName + "-" + name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: WorkerRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if err := c.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		fmt.Fprintf(warn, "warning: RoleBinding %s/%s to the %s ClusterRole not created (%v); claims are refused (capability_denied) until it exists\n",
			ns, rb.Name, WorkerRoleName, reasonOf(err))
	}
}

func reasonOf(err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden"
	}
	return err.Error()
}

// heartbeat renews the registration's heartbeat through the status subresource. A
// renewal always moves the stamp forward, and a retired row is never renewed.
func (o *Options) heartbeat(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wr := &fleetv1alpha1.WorkerRegistration{}
		if err := c.Get(ctx, key, wr); err != nil {
			if apierrors.IsNotFound(err) {
				return usageErrorf("no WorkerRegistration %s/%s", key.Namespace, key.Name)
			}
			return err
		}
		if wr.Status.Phase == fleetv1alpha1.PhaseRetired {
			return errRetired(key)
		}
		base := wr.DeepCopy()
		now := o.Now().Truncate(time.Second)
		if old := wr.Status.LastHeartbeatAt; old != nil && !now.After(old.Time) {
			now = old.Add(time.Second)
		}
		wr.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(now))
		return c.Status().Patch(ctx, wr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// errRetired is the end of a registration's heartbeats.
func errRetired(key client.ObjectKey) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("WorkerRegistration %s/%s is retired: register anew", key.Namespace, key.Name)}
}

func newRegisterCommand(o *Options) *cobra.Command {
	var f registerFlags
	var out *output
	cmd := &cobra.Command{
		Use:   "register --identity LOGIN --repository OWNER/NAME [--pid PID]",
		Short: "Register a worker process and print its WorkerRegistration name",
		Long: `Register the calling process (or --pid) as a worker: read the host id
(/etc/machine-id), the boot id and the process start time (field 22 of /proc/<pid>/stat),
mint an inst- instance id, create the WorkerRegistration, its ServiceAccount and a
RoleBinding to the fleet-worker ClusterRole (where permitted), renew the first heartbeat,
and print the registration's name. Keep it alive with 'kubectl fleet heartbeat --every'.`,
		Example: `  # Register this shell as bot-alice, working on acme/widgets
  export FLEET_WORKER=$(kubectl fleet register --identity bot-alice --repository acme/widgets --pid $$)

  # Register another process, with a 5-minute heartbeat TTL
  kubectl fleet register --identity bot-bob --repository acme/widgets --pid 4242 --ttl 5m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if err := out.validate(); err != nil {
				return err
			}
			pid := f.pid
			if pid == 0 {
				pid = int64(os.Getppid())
			}
			p, err := o.processFacts(pid, f.hostID)
			if err != nil {
				return err
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			inst := newInstanceID()
			name := f.name
			if name == "" {
				name = defaultName(f.identity, inst)
			}
			wr := f.registration(ns, name, inst, p)
			if err := o.register(cmd.Context(), c, wr, f.serviceAccount, o.Streams.ErrOut); err != nil {
				return err
			}
			return out.print(o.Streams.Out, wr, func(w io.Writer, _ bool) error {
				_, err := fmt.Fprintln(w, wr.Name)
				return err
			})
		},
	}
	f.add(cmd, true)
	out = addOutputFlag(cmd)
	return cmd
}

// workerFlag adds --worker, defaulting to $FLEET_WORKER.
func workerFlag(cmd *cobra.Command, into *string) {
	cmd.Flags().StringVar(into, "worker", "", "The worker's WorkerRegistration name (default: $"+EnvWorker+").")
}

func (o *Options) workerName(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if w := o.Getenv(EnvWorker); w != "" {
		return w, nil
	}
	return "", usageErrorf("no worker: pass --worker or set %s (kubectl fleet register prints the name)", EnvWorker)
}

// checkEvery refuses a heartbeat interval under a second (zero allowed when once is): a
// registration stores its heartbeat in whole seconds and each beat is one write to the
// API server, so a faster beat only adds writes, and would have to date each one a second
// after the last, ahead of the clock.
func checkEvery(every time.Duration, once bool) error {
	switch {
	case every == 0 && once:
		return nil
	case every < time.Second:
		return usageErrorf("--every %s: the interval is at least 1s (heartbeats are stored in whole seconds, and each is one write to the API server)", every)
	}
	return nil
}

func newHeartbeatCommand(o *Options) *cobra.Command {
	var worker string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "heartbeat [--worker NAME] [--every 10s]",
		Short: "Renew a worker's heartbeat once, or every interval until stopped",
		Example: `  # Renew once
  kubectl fleet heartbeat --worker bot-alice-1a2b3c4d

  # Keep renewing every 10 seconds until interrupted
  kubectl fleet heartbeat --every 10s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEvery(every, true); err != nil {
				return err
			}
			name, err := o.workerName(worker)
			if err != nil {
				return err
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: ns, Name: name}
			if err := o.heartbeat(cmd.Context(), c, key); err != nil || every == 0 {
				return err
			}
			return o.keepBeating(cmd.Context(), c, key, every)
		},
	}
	workerFlag(cmd, &worker)
	cmd.Flags().DurationVar(&every, "every", 0, "Keep renewing at this interval until interrupted (0: once).")
	return cmd
}

// keepBeating renews the heartbeat every interval until ctx is done. A failed renewal is
// reported and retried at the next tick; a retired or deleted registration stops it.
func (o *Options) keepBeating(ctx context.Context, c client.Client, key client.ObjectKey, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := o.heartbeat(ctx, c, key)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.As(err, new(*ExitError)):
			return err
		default:
			fmt.Fprintf(o.Streams.ErrOut, "warning: heartbeat of %s failed: %v\n", key.Name, err)
		}
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}
