// Package cli is kubectl-fleet, the command line of fleet-controller for workers and
// operators: register a worker process, keep its heartbeat, claim and give back tasks,
// mint a gateway token, plan and approve retirements, show the fleet, and serve the
// worker commands as MCP tools. cmd/kubectl-fleet only calls Main; tests drive
// NewRootCommand with their own streams and kubeconfig.
//
// Every command reads and writes the project's own API objects (api/v1alpha1) through a
// controller-runtime client built from the standard kubeconfig flags of
// k8s.io/cli-runtime. Decisions stay with the controller: the commands create objects,
// wait for the controller's answer, and report it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// Environment variables the commands read. `kubectl fleet run` sets the first two for
// the command it starts, so a worker's own kubectl-fleet calls know who they are.
const (
	// EnvWorker names the worker's WorkerRegistration (--worker).
	EnvWorker = "FLEET_WORKER"
	// EnvNamespace is the namespace of the worker's objects when -n is not given.
	EnvNamespace = "FLEET_NAMESPACE"
	// EnvGatewayURL is the base URL of the Gitea write gateway (--gateway-url).
	EnvGatewayURL = "FLEET_GATEWAY_URL"
	// EnvGiteaURL is the base URL of a Gitea the worker may read (--gitea-url).
	EnvGiteaURL = "FLEET_GITEA_URL"
	// EnvGiteaToken is a read token for that Gitea (--gitea-token-file overrides it).
	EnvGiteaToken = "FLEET_GITEA_TOKEN"
)

// GatewayAudience is the audience of the ServiceAccount tokens the gateway accepts.
const GatewayAudience = fleetv1alpha1.GatewayAudience

// Scheme knows the client-go and fleet types.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(fleetv1alpha1.AddToScheme(Scheme))
}

// Options are the settings every command shares.
type Options struct {
	// Streams are stdin, stdout and stderr.
	Streams genericiooptions.IOStreams
	// ConfigFlags are the standard kubeconfig flags (--kubeconfig, --context, -n, ...).
	ConfigFlags *genericclioptions.ConfigFlags
	// Getenv reads the environment (os.Getenv; tests give their own).
	Getenv func(string) string
	// Now is the clock.
	Now func() time.Time
	// ProcRoot is where /proc and /etc are read ("/" normally).
	ProcRoot string
	// Poll is how often a wait re-reads its object when it cannot watch it (a wait
	// normally follows the object through a watch).
	Poll time.Duration
	// Self is the binary run starts as the helper that becomes the worker's command
	// (os.Executable() when empty).
	Self string

	client client.Client
}

// NewOptions returns Options for streams reading the process environment.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Streams:     streams,
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		Getenv:      os.Getenv,
		Now:         time.Now,
		ProcRoot:    "/",
		Poll:        200 * time.Millisecond,
	}
}

// FieldManager is the field manager kubectl fleet writes as, what managedFields show for
// the objects and fields it wrote.
const FieldManager = "kubectl-fleet"

// Client returns the controller-runtime client of the configured cluster (made once),
// writing as FieldManager.
func (o *Options) Client() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme, FieldOwner: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server: %w", err)
	}
	o.client = c
	return c, nil
}

// Namespace is -n, else $FLEET_NAMESPACE, else the kubeconfig context's namespace.
func (o *Options) Namespace() (string, error) {
	if o.ConfigFlags.Namespace != nil && *o.ConfigFlags.Namespace != "" {
		return *o.ConfigFlags.Namespace, nil
	}
	if ns := o.Getenv(EnvNamespace); ns != "" {
		return ns, nil
	}
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// NewRootCommand returns the kubectl-fleet command tree.
func NewRootCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-fleet",
		Short: "Work with a fleet-controller fleet: workers, task claims, retirement plans",
		Long: `kubectl fleet registers worker processes and keeps their heartbeat, claims Gitea
issues and pull requests for them, and plans, approves and reports the retirement of
stale registrations.

Worker commands:   register, heartbeat, run, claim, release, complete, token, git-credential, mcp
Operator commands: plan, approve, status

Exit codes (every command):
` + exitCodeTable,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl fleet",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	root.AddCommand(
		newRegisterCommand(o), newHeartbeatCommand(o), newRunCommand(o),
		newClaimCommand(o), newReleaseCommand(o, false), newReleaseCommand(o, true), newTokenCommand(o), newGitCredentialCommand(o),
		newPlanCommand(o), newApproveCommand(o), newStatusCommand(o),
		newMCPCommand(o),
	)
	return root
}

// Main runs kubectl-fleet with args and returns the process exit code.
func Main(args []string) int {
	if code, ok := runExecShim(); ok {
		return code
	}
	o := NewOptions(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	return Execute(context.Background(), o, args)
}

// Execute runs the command tree with args and returns the exit code; errors are printed
// on o.Streams.ErrOut.
func Execute(ctx context.Context, o *Options, args []string) int {
	root := NewRootCommand(o)
	root.SetArgs(args)
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	ctx, stop := signalContext(ctx)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitCodeOf(err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		code = ExitUsage
	}
	var ee *ExitError
	if !errors.As(err, &ee) || !ee.Silent {
		fmt.Fprintln(o.Streams.ErrOut, "error: "+strings.TrimPrefix(err.Error(), "error: "))
	}
	return code
}
