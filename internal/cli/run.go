package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envExecShim marks the short-lived helper `run` starts: it waits until the launcher has
// registered its pid, then replaces itself with the worker's command (exec keeps the pid
// and the start time, so the registration names the command's own process).
const envExecShim = "FLEET_CLI_EXEC_SHIM"

// runExecShim runs the helper when this process is one; ok is false otherwise. It must
// be called before anything else in main (and in TestMain of suites that use run).
func runExecShim() (code int, ok bool) {
	if os.Getenv(envExecShim) != "1" || len(os.Args) < 3 {
		return 0, false
	}
	_ = os.Unsetenv(envExecShim)
	gate := os.NewFile(3, "gate")
	buf := make([]byte, 2)
	n, _ := io.ReadFull(gate, buf)
	_ = gate.Close()
	if n != 2 || string(buf) != "go" {
		return ExitFailure, true // the launcher could not register: do not start unregistered
	}
	path, argv := os.Args[1], os.Args[2:]
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "kubectl fleet run: exec %s: %v\n", path, err)
	return 127, true
}

// RunExecShim is runExecShim for test binaries: call it first in TestMain and exit with
// the code when ok.
func RunExecShim() (code int, ok bool) { return runExecShim() }

func newRunCommand(o *Options) *cobra.Command {
	var f registerFlags
	var every time.Duration
	var asUser string
	isolate := true
	cmd := &cobra.Command{
		Use:   "run --identity LOGIN --repository OWNER/NAME -- CMD [ARG...]",
		Short: "Start a command as a registered worker, heartbeat while it runs, pass on its exit code",
		Long: `Start CMD as a worker: register CMD's own process (its pid and start time), renew the
heartbeat while it runs, and let the registration lapse when it exits: heartbeats stop,
nothing is deleted, and a later retirement plan finds the row stale and its process gone.
CMD gets FLEET_WORKER and FLEET_NAMESPACE, so kubectl fleet commands it runs (claim,
release, token, mcp) act for this worker, and a KUBECONFIG of the worker's own
ServiceAccount (a token renewed while it runs): CMD never gets the launcher's kubeconfig
or Gitea token variables, so it can do what the fleet-worker role allows its worker and
nothing more. --isolate=false hands CMD the launcher's environment unchanged. The exit code is CMD's own (128+N when signal
N ended it); SIGINT and SIGTERM are passed on to CMD. The registration's name is
printed on stderr.`,
		Example: `  # Run an agent as worker bot-alice on acme/widgets
  kubectl fleet run --identity bot-alice --repository acme/widgets -- ./agent --task-loop

  # A shell whose kubectl fleet commands act for the worker
  kubectl fleet run --identity bot-bob --repository acme/widgets -- sh -c 'kubectl fleet claim issue 3'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usageErrorf("give the command after --: kubectl fleet run [flags] -- CMD [ARG...]")
			}
			if err := f.check(); err != nil {
				return err
			}
			if every == 0 {
				every = max(f.ttl/3, time.Second)
			}
			if err := checkEvery(every, false); err != nil {
				return err
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return usageErrorf("command %q: %v", args[0], err)
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			if isolate && !f.serviceAccount {
				return usageErrorf("--isolate needs the worker's ServiceAccount: drop --service-account=false, or pass --isolate=false")
			}
			var as *osUser
			if asUser != "" {
				if !isolate {
					return usageErrorf("--as-user needs --isolate: the command gets the worker's own kubeconfig, readable by that user")
				}
				if as, err = lookupOSUser(asUser); err != nil {
					return err
				}
			}
			return o.runWorker(cmd, c, &f, ns, path, args, every, isolate, as)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&isolate, "isolate", true,
		"Give CMD a kubeconfig of the worker's own ServiceAccount instead of the launcher's credentials.")
	cmd.Flags().DurationVar(&every, "every", 0, "Heartbeat interval (default: a third of --ttl).")
	cmd.Flags().StringVar(&asUser, "as-user", "",
		"Run CMD as this OS user (name or uid; the launcher must run as root), so it cannot read the launcher's environment or files.")
	return cmd
}

func (o *Options) runWorker(cmd *cobra.Command, c client.Client, f *registerFlags, ns, path string, args []string, every time.Duration,
	isolate bool, as *osUser) error {
	ctx := cmd.Context()
	self := o.Self
	switch {
	case self == "" && as != nil:
		// The helper starts as the other user, who may not reach this binary's folder (a
		// checkout under a home of mode 0700): the kernel's link to the running binary
		// needs no search permission on the folders of its path.
		self = "/proc/self/exe"
	case self == "":
		var err error
		if self, err = os.Executable(); err != nil {
			return fmt.Errorf("finding kubectl-fleet's own binary: %w", err)
		}
	}
	inst := newInstanceID()
	name := f.name
	if name == "" {
		name = defaultName(f.identity, inst)
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return err
	}
	child := exec.Command(self, append([]string{path}, args...)...)
	child.Env = append(withoutEnv(os.Environ(), EnvWorker, EnvNamespace, envExecShim),
		EnvWorker+"="+name, EnvNamespace+"="+ns, envExecShim+"=1")
	var creds *childCredentials
	if isolate {
		// The kubeconfig's path is fixed now; it is written, with its first token, once
		// the worker is registered, and the command only starts after that (the gate).
		if creds, err = newChildCredentials(as); err != nil {
			return err
		}
		defer creds.remove()
		child.Env = append(withoutEnv(child.Env, credentialEnv...), "KUBECONFIG="+creds.kubeconfig())
	}
	if as != nil {
		child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: as.uid, Gid: as.gid}}
		child.Env = append(withoutEnv(child.Env, "HOME", "USER", "LOGNAME"), "HOME="+as.home, "USER="+as.name, "LOGNAME="+as.name)
	}
	child.ExtraFiles = []*os.File{gateR}
	// The command's stderr and this launcher's messages share one writer.
	errOut := &syncWriter{w: o.Streams.ErrOut}
	child.Stdin, child.Stdout, child.Stderr = o.Streams.In, o.Streams.Out, errOut
	// Signals are passed on to the command, not acted on here.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		_ = gateR.Close()
		_ = gateW.Close()
		return fmt.Errorf("starting %s: %w", args[0], err)
	}
	_ = gateR.Close()
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	abort := func(err error) error {
		_ = gateW.Close() // the helper exits without running the command
		<-exited          //nolint:errcheck // the helper exits at once; its status says nothing more
		return err
	}
	p, err := o.processFacts(int64(child.Process.Pid), f.hostID)
	if err != nil {
		return abort(err)
	}
	wr := f.registration(ns, name, inst, p)
	if err := o.register(ctx, c, wr, f.serviceAccount, errOut); err != nil {
		return abort(err)
	}
	fmt.Fprintf(errOut, "kubectl fleet run: registered %s/%s (pid %d)\n", ns, name, p.PID)
	if creds != nil {
		cfg, err := o.ConfigFlags.ToRESTConfig()
		if err != nil {
			return abort(err)
		}
		if err := creds.write(ctx, c, cfg, ns, name); err != nil {
			return abort(fmt.Errorf("%w (pass --isolate=false to run the command with your own credentials)", err))
		}
	}
	if _, err := gateW.Write([]byte("go")); err != nil {
		return abort(fmt.Errorf("starting %s: %w", args[0], err))
	}
	_ = gateW.Close()

	key := client.ObjectKeyFromObject(wr)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			_ = child.Process.Signal(s)
		case <-tick.C:
			// The heartbeat must not outlive the command: a renewal racing the exit is
			// harmless, since the pid is gone either way.
			if err := o.heartbeat(ctx, c, key); err != nil && ctx.Err() == nil {
				fmt.Fprintf(errOut, "kubectl fleet run: heartbeat of %s failed: %v\n", name, err)
			}
			if creds != nil && creds.due(o.Now()) {
				if err := creds.renew(ctx, c, ns, name); err != nil && ctx.Err() == nil {
					fmt.Fprintf(errOut, "kubectl fleet run: renewing the command's token failed: %v\n", err)
				}
			}
		case err := <-exited:
			return exitOf(err)
		}
	}
}

// exitOf turns the command's end into this command's exit code.
func exitOf(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return &ExitError{Code: code, Err: err, Silent: true}
}

func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
outer:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

// syncWriter serialises writes from the launcher and the copy of its command's output.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
