package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

var shaPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// giteaFlags say where the worker reads Gitea and where it writes (the gateway).
type giteaFlags struct {
	giteaURL   string
	tokenFile  string
	gatewayURL string
	// resolved says the caller already settled all three (the MCP server reads its
	// configuration once, at start): token is giteaURL's read token, an empty field
	// means none, and the environment is not consulted.
	resolved bool
	token    string
}

func (f *giteaFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.giteaURL, "gitea-url", "", "Gitea base URL the worker may read (default: $"+EnvGiteaURL+", else the gateway).")
	cmd.Flags().StringVar(&f.tokenFile, "gitea-token-file", "", "File holding a read token for --gitea-url (default: $"+EnvGiteaToken+").")
	cmd.Flags().StringVar(&f.gatewayURL, "gateway-url", "", "Base URL of the Gitea write gateway (default: $"+EnvGatewayURL+").")
}

func (o *Options) gatewayURL(f *giteaFlags) string {
	if f.gatewayURL != "" || f.resolved {
		return strings.TrimRight(f.gatewayURL, "/")
	}
	return strings.TrimRight(o.Getenv(EnvGatewayURL), "/")
}

// readClient returns a Gitea SDK client for reads: --gitea-url with its token, else
// the gateway with the worker's gateway token. nil when neither is configured.
func (o *Options) readClient(ctx context.Context, c client.Client, ns, worker string, f *giteaFlags) (*gitea.Client, error) {
	url, token := f.giteaURL, f.token
	if !f.resolved {
		url = cmp.Or(url, o.Getenv(EnvGiteaURL))
		token = o.Getenv(EnvGiteaToken)
	}
	if url != "" {
		if f.tokenFile != "" {
			b, err := os.ReadFile(f.tokenFile)
			if err != nil {
				return nil, usageErrorf("reading --gitea-token-file: %v", err)
			}
			token = strings.TrimSpace(string(b))
		}
		return newGiteaClient(ctx, strings.TrimRight(url, "/"), token, nil)
	}
	gw := o.gatewayURL(f)
	if gw == "" {
		return nil, nil
	}
	tok, err := o.gatewayToken(ctx, c, ns, worker, time.Hour)
	if err != nil {
		return nil, err
	}
	return newGiteaClient(ctx, gw, tok.Status.Token, nil)
}

// newGiteaClient returns an SDK client that sends token as a bearer token (Gitea and the
// gateway both accept it); a non-nil refusals records the gateway's 403 answers.
func newGiteaClient(ctx context.Context, url, token string, refusals *refusalRecorder) (*gitea.Client, error) {
	rt := http.DefaultTransport
	if refusals != nil {
		refusals.next = rt
		rt = refusals
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &bearer{token: token, next: rt}}
	return gitea.NewClient(url, gitea.SetHTTPClient(hc), gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// GatewayRefusal is the gateway's typed refusal of a write: HTTP 403 with
// {"reason": ..., "message": ...}. It names no other task.
type GatewayRefusal struct {
	Status  int    `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (r *GatewayRefusal) Error() string {
	return fmt.Sprintf("the gateway refused the write (%s): %s", r.Reason, r.Message)
}

// refusalRecorder keeps the last 403 answer's typed body, leaving the response intact
// for the SDK.
type refusalRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	last *GatewayRefusal
}

func (rr *refusalRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rr.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	ref := &GatewayRefusal{Status: resp.StatusCode}
	if rerr != nil || json.Unmarshal(body, ref) != nil || ref.Reason == "" {
		ref.Reason = "forbidden"
		if ref.Message == "" {
			ref.Message = strings.TrimSpace(string(body))
		}
	}
	rr.mu.Lock()
	rr.last = ref
	rr.mu.Unlock()
	return resp, nil
}

// typed returns the recorded refusal in place of the SDK's error, when there is one.
func (rr *refusalRecorder) typed(err error) error {
	if err == nil {
		return nil
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.last != nil {
		return rr.last
	}
	return err
}

// resolveTarget builds the claim target: the worker's repository binding (or
// repository), and for a pull request the head. With a Gitea to read it checks that the
// item exists and is of the kind asked for, before anything is created.
func (o *Options) resolveTarget(ctx context.Context, c client.Client, wr *fleetv1alpha1.WorkerRegistration, f *giteaFlags,
	repository, kind string, number int64, head string) (fleetv1alpha1.TaskTarget, error) {
	if repository == "" {
		repository = wr.Spec.Repository
	}
	if !repoPattern.MatchString(repository) {
		return fleetv1alpha1.TaskTarget{}, usageErrorf("worker %s has no owner/name repository binding: pass --repository", wr.Name)
	}
	t := fleetv1alpha1.TaskTarget{Repository: repository, Kind: kind, Number: number, HeadSHA: head}
	sdk, err := o.readClient(ctx, c, wr.Namespace, wr.Name, f)
	if err != nil {
		return t, err
	}
	if sdk == nil {
		if kind == fleetv1alpha1.TargetKindPullRequest && head == "" {
			return t, usageErrorf("--head is required for a pull request when no --gitea-url or --gateway-url is set")
		}
		return t, nil
	}
	owner, name, _ := strings.Cut(repository, "/")
	is, resp, err := sdk.GetIssue(owner, name, number)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return t, usageErrorf("%s #%d does not exist", repository, number)
	}
	if err != nil {
		return t, fmt.Errorf("reading %s#%d from Gitea: %w", repository, number, err)
	}
	isPull := is.PullRequest != nil
	switch {
	case kind == fleetv1alpha1.TargetKindIssue && isPull:
		return t, usageErrorf("%s#%d is a pull request: use claim pr %d", repository, number, number)
	case kind == fleetv1alpha1.TargetKindPullRequest && !isPull:
		return t, usageErrorf("%s#%d is an issue, not a pull request: use claim issue %d", repository, number, number)
	case kind == fleetv1alpha1.TargetKindIssue:
		return t, nil
	}
	if head == "" {
		pr, _, err := sdk.GetPullRequest(owner, name, number)
		if err != nil {
			return t, fmt.Errorf("reading pull request %s#%d from Gitea: %w", repository, number, err)
		}
		if pr.Head == nil || pr.Head.Sha == "" {
			return t, fmt.Errorf("pull request %s#%d has no head in Gitea", repository, number)
		}
		t.HeadSHA = pr.Head.Sha
	}
	return t, nil
}

// gatewayToken requests a bound token of the worker's ServiceAccount (named like its
// WorkerRegistration) for the gateway's audience.
func (o *Options) gatewayToken(ctx context.Context, c client.Client, ns, worker string, d time.Duration) (*authenticationv1.TokenRequest, error) {
	return serviceAccountToken(ctx, c, ns, worker, d, GatewayAudience)
}

// serviceAccountToken requests a token of the worker's ServiceAccount (named like its
// WorkerRegistration) that lives d, for audiences (none: the API server's own).
func serviceAccountToken(ctx context.Context, c client.Client, ns, worker string, d time.Duration, audiences ...string) (*authenticationv1.TokenRequest, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: worker, Namespace: ns}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To(int64(d / time.Second)),
	}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usageErrorf("no ServiceAccount %s/%s: the worker's ServiceAccount is named like its registration", ns, worker)
		}
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", ns, worker, err)
	}
	tr.TypeMeta = metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenRequest"}
	tr.Name, tr.Namespace = worker, ns
	return tr, nil
}

func newTokenCommand(o *Options) *cobra.Command {
	var worker string
	var duration time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:   "token [--worker NAME] [--duration 1h]",
		Short: "Print a gateway token for the worker (a bound ServiceAccount token)",
		Long: `Request a token of the worker's ServiceAccount (named like its WorkerRegistration)
with the gateway's audience, ` + GatewayAudience + `, and print it. Any Gitea client
pointed at the gateway authenticates with it; the gateway forwards only the writes the
worker's active claim permits.`,
		Example: `  # Point curl at the gateway
  curl -H "Authorization: Bearer $(kubectl fleet token)" "$FLEET_GATEWAY_URL/api/v1/user"

  # Point tea at the gateway (a login whose token is the gateway token)
  tea login add --name fleet --url "$FLEET_GATEWAY_URL" --token "$(kubectl fleet token)"

  # For git, use the credential helper instead: kubectl fleet git-credential --help

  # The whole TokenRequest, with its expiry
  kubectl fleet token --duration 10m -o yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if duration < 10*time.Minute || duration > time.Hour {
				return usageErrorf("--duration %s: the API server issues tokens for at least 10m, and the gateway accepts them for at most 1h", duration)
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
			tr, err := o.gatewayToken(cmd.Context(), c, ns, name, duration)
			if err != nil {
				return err
			}
			return out.print(o.Streams.Out, tr, func(w io.Writer, _ bool) error {
				_, err := fmt.Fprintln(w, tr.Status.Token)
				return err
			})
		},
	}
	workerFlag(cmd, &worker)
	cmd.Flags().DurationVar(&duration, "duration", time.Hour, "Lifetime of the token (10m to 1h).")
	out = addOutputFlag(cmd)
	return cmd
}

var errNoGateway = errors.New("no gateway: pass --gateway-url or set " + EnvGatewayURL)
