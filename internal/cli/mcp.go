package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"code.gitea.io/sdk/gitea"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Version is this binary's version, reported to MCP clients: the module version it was
// built at, or, for a build from a working tree, "devel+" and its VCS revision ("devel"
// when neither is known).
var Version = buildVersion()

func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel+" + rev
}

// MCPConfig is what one MCP server acts for.
type MCPConfig struct {
	// Client reaches the API server as the worker (or its launcher).
	Client client.Client
	// Namespace and Worker name the worker's WorkerRegistration.
	Namespace, Worker string
	// GiteaURL and GiteaToken are where the worker reads Gitea ("" = through the gateway).
	GiteaURL, GiteaToken string
	// GatewayURL is the Gitea write gateway ("" = no write tool can succeed).
	GatewayURL string
	// Timeout bounds each claim wait.
	Timeout time.Duration
	// StartError, when set, is why the server cannot act for the worker (no such worker, no
	// API server, no namespace). The server still starts, with its tools listed, and
	// answers every tool call with this error: MCP hosts hide a server's standard error, so
	// a server that exited before the handshake would show only "connection closed".
	StartError error
}

// mcpTools serves the worker commands as MCP tools.
type mcpTools struct {
	o   *Options
	cfg MCPConfig

	// resolve picks a write's target (t.target; tests stand in for the API server).
	resolve func(ctx context.Context, number int64) (writeTarget, error)

	mu       sync.Mutex
	token    string
	tokenExp time.Time
}

// NewMCPServer returns the MCP server of one worker: inspect, claim, release, complete,
// the Gitea writes through the gateway (comment, review, approve, merge, open_pr), and the
// Gitea reads of the worker's repository (read_issue, read_pr, read_diff, read_file,
// list_comments, read_timeline, search_issues).
func (o *Options) NewMCPServer(cfg MCPConfig) *mcp.Server {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	t := &mcpTools{o: o, cfg: cfg}
	t.resolve = t.target
	return t.server()
}

// server registers the tools: the worker commands and the Gitea writes here, the Gitea
// reads in mcpread.go, the commits to a work branch in mcpwrite.go. Each is one addTool
// call; a tool added later is one more.
func (t *mcpTools) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "kubectl-fleet", Version: Version}, &mcp.ServerOptions{
		// The tool list never changes while the server runs, and the server sends no log
		// messages: it advertises tools only, without listChanged.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Instructions: "Tools of one fleet worker. Read your repository's issues, pull requests, diffs and files " +
			"with the read_ and list_ tools, inspect a target, then claim it; the controller derives your role. " +
			"A refused claim is final: inspect fresh state before choosing again. Gitea writes go through the " +
			"gateway and succeed only within your active claim's capability.",
	})
	addTool(s, &mcp.Tool{Name: "inspect", Annotations: readOnly(), InputSchema: inputSchema[InspectInput](kinds), Description: "Show your registration, your own claims and, given kind and number, " +
		"the target's state as the controller sees it (derived role, head, labels, dependencies, whether it is claimed)."}, t.inspect)
	addTool(s, &mcp.Tool{Name: "claim", Annotations: writes(false, false), InputSchema: inputSchema[ClaimInput](kinds), Description: "Claim one issue or pull request (kind issue|pr, number, optional head). " +
		"Returns the capability (role, operations, expiry) or a typed refusal."}, t.claim)
	addTool(s, &mcp.Tool{Name: "release", Annotations: writes(false, true), Description: "Give your open claim (or the named one) back."}, t.release)
	addTool(s, &mcp.Tool{Name: "complete", Annotations: writes(false, true), Description: "Report your open claim's (or the named one's) work cycle finished."}, t.complete)
	addTool(s, &mcp.Tool{Name: "comment", Annotations: writes(false, false), Description: "Comment on the claimed issue or pull request, through the gateway."}, t.comment)
	addTool(s, &mcp.Tool{Name: "review", Annotations: writes(false, false), Description: "Review the claimed pull request at the claimed head (comment or request changes), through the gateway."}, t.review)
	addTool(s, &mcp.Tool{Name: "approve", Annotations: writes(false, false), Description: "Approve the claimed pull request at the claimed head, through the gateway."}, t.approve)
	addTool(s, &mcp.Tool{Name: "merge", Annotations: writes(true, false), InputSchema: inputSchema[MergeInput](mergeStyles), Description: "Merge the claimed pull request at the claimed head, through the gateway."}, t.merge)
	addTool(s, &mcp.Tool{Name: "open_pr", Annotations: writes(false, false), Description: "Open a pull request for the claimed issue from a work branch, through the gateway."}, t.openPR)
	t.addReadTools(s)
	t.addFileTools(s)
	if t.cfg.StartError != nil {
		s.AddReceivingMiddleware(refuseCalls(t.cfg.StartError))
	}
	return s
}

// addTool registers a tool whose handler returns *Out, Out a struct. The tool's output
// schema is derived from Out (outputSchema), its result carries the value as structured
// content (checked against that schema), and an error becomes a tool error whose
// structured content is the refusal or failure (toolError).
//
// The SDK is handed Out as any, with the schema set here: given the typed Out it would
// marshal the zero Out over a tool error's structured content, and the agent would lose
// the refusal.
func addTool[In, Out any](s *mcp.Server, tool *mcp.Tool, h func(context.Context, In) (*Out, error)) {
	tool.OutputSchema = outputSchema[Out]()
	mcp.AddTool(s, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		out, err := h(ctx, in)
		if err != nil {
			return toolError(err), nil, nil
		}
		return nil, out, nil
	})
}

// outputSchema is the JSON schema of Out as the SDK infers one, with the API's
// timestamps (metav1.Time, which marshals to an RFC 3339 string, or null when unset) as
// strings. Out must be a struct: a tool's structured content is a JSON object.
func outputSchema[Out any]() *jsonschema.Schema {
	s, err := jsonschema.For[Out](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[metav1.Time](): {Types: []string{"null", "string"}, Format: "date-time"},
	}})
	if err != nil {
		panic(fmt.Sprintf("the output schema of %T: %v", *new(Out), err)) // the output types are fixed
	}
	if s.Type != "object" {
		panic(fmt.Sprintf("the output schema of %T is %q: a tool's output must be a struct", *new(Out), s.Type))
	}
	return s
}

// refuseCalls answers every tool call with err, as a tool error the agent reads, and
// passes every other request (the handshake, the tool list) on.
func refuseCalls(err error) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			return toolError(fmt.Errorf("the fleet MCP server cannot act for its worker: %w", err)), nil
		}
	}
}

func newMCPCommand(o *Options) *cobra.Command {
	var worker string
	var gf giteaFlags
	var timeout time.Duration
	var httpFlags *mcpHTTPFlags
	cmd := &cobra.Command{
		Use:   "mcp [--worker NAME] [--gateway-url URL]",
		Short: "Serve the worker commands as MCP tools over stdio, or over HTTP with --http",
		Long: `Serve the worker's commands to an LLM agent as Model Context Protocol tools over
stdin and stdout: inspect, claim, release, complete, the Gitea writes its capability
permits, through the gateway (comment, review, approve, merge, open_pr), and reads of the
worker's repository with its read token (read_issue, read_pr, read_diff, read_file,
list_comments, read_timeline, search_issues). A refusal comes back as a tool error with a
structured payload (the claim's class, blocker, predicate and rule, or the gateway's
reason) that names no other task.`,
		Example: `  # In an MCP client configuration, inside 'kubectl fleet run':
  {"command": "kubectl", "args": ["fleet", "mcp", "--gateway-url", "http://127.0.0.1:8083"]}`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := MCPConfig{GatewayURL: o.gatewayURL(&gf), Timeout: timeout, GiteaURL: cmp.Or(gf.giteaURL, o.Getenv(EnvGiteaURL)),
				GiteaToken: o.Getenv(EnvGiteaToken)}
			if httpFlags.set() { // mcphttp.go
				return o.serveMCPHTTP(cmd.Context(), cfg, worker, httpFlags)
			}
			if cfg.StartError = o.mcpWorker(cmd.Context(), &cfg, worker); cfg.StartError != nil {
				// Said on standard error too, for a person running it by hand.
				fmt.Fprintf(o.Streams.ErrOut, "error: %v (every tool call answers with this)\n", cfg.StartError)
			}
			return o.NewMCPServer(cfg).Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
	workerFlag(cmd, &worker)
	gf.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long a claim waits for the controller.")
	httpFlags = addMCPHTTPFlags(cmd)
	return cmd
}

// mcpWorker settles whom the MCP server acts for: the worker (flag or FLEET_WORKER), its
// namespace, an API client, and the worker's registration, which must exist.
func (o *Options) mcpWorker(ctx context.Context, cfg *MCPConfig, flag string) error {
	name, err := o.workerName(flag)
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
	if _, err := o.worker(ctx, c, ns, name); err != nil {
		return err
	}
	cfg.Client, cfg.Namespace, cfg.Worker = c, ns, name
	return nil
}

// --- results ----------------------------------------------------------------------------

// toolError is a refusal or failure as a tool error: the text for the model, and the
// structured payload.
func toolError(err error) *mcp.CallToolResult {
	payload := map[string]any{"error": err.Error()}
	var ref *Refusal
	var gw *GatewayRefusal
	switch {
	case errors.As(err, &ref):
		payload = map[string]any{
			"refused": true, "claim": ref.Claim, "outcome": ref.Result.Outcome, "class": ref.Result.Class,
			"blocker": ref.Result.Blocker, "failedPredicate": ref.Result.FailedPredicate, "ruleID": ref.Result.RuleID,
			"message": ref.Result.Message, "contentionIsNormal": ref.Result.ContentionIsNormal,
			"reassessFromFreshState": ref.Result.ReassessFromFreshState, "retryPermitted": ref.Result.RetryPermitted,
		}
	case errors.As(err, &gw):
		payload = map[string]any{"refused": true, "reason": gw.Reason, "message": gw.Message}
	}
	b, _ := json.Marshal(payload)
	return &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b),
		Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// --- neutral inspection -----------------------------------------------------------------

// InspectInput names an optional target.
type InspectInput struct {
	Kind       string `json:"kind,omitempty" jsonschema:"issue or pr; with number, also show that target"`
	Number     int64  `json:"number,omitempty" jsonschema:"issue or pull request number"`
	Repository string `json:"repository,omitempty" jsonschema:"owner/name of the target's repository (default: your registration's repository)"`
}

// InspectOutput is the worker's neutral view.
type InspectOutput struct {
	Worker WorkerView  `json:"worker"`
	Claims []ClaimView `json:"claims"`
	Target *TargetView `json:"target,omitempty"`
}

// WorkerView is the worker's own registration.
type WorkerView struct {
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	Identity       string `json:"identity"`
	Repository     string `json:"repository"`
	Phase          string `json:"phase"`
	OwnershipState string `json:"ownershipState"`
}

// ClaimView is one of the worker's own claims.
type ClaimView struct {
	Name       string                        `json:"name"`
	Target     fleetv1alpha1.TaskTarget      `json:"target"`
	Phase      string                        `json:"phase"`
	Role       string                        `json:"role,omitempty"`
	Capability *fleetv1alpha1.TaskCapability `json:"capability,omitempty"`
	// WorkBranch is the branch an author's claim pushes to and opens its pull request from.
	WorkBranch string                     `json:"workBranch,omitempty"`
	Result     *fleetv1alpha1.ClaimResult `json:"result,omitempty"`
	Ended      string                     `json:"endedReason,omitempty"`
}

// TargetView is a target as the controller reads it from Gitea.
type TargetView struct {
	Repository     string                 `json:"repository"`
	Kind           string                 `json:"kind"`
	Number         int64                  `json:"number"`
	State          string                 `json:"state"`
	Merged         bool                   `json:"merged,omitempty"`
	HeadSHA        string                 `json:"headSHA,omitempty"`
	BaseBranch     string                 `json:"baseBranch,omitempty"`
	ParityRevision string                 `json:"parityRevision,omitempty"`
	Author         string                 `json:"author"`
	Reviewed       bool                   `json:"reviewed,omitempty"`
	Approved       bool                   `json:"approved,omitempty"`
	Labels         []string               `json:"labels,omitempty"`
	Dependencies   []claim.DependencyEdge `json:"dependencies,omitempty"`
	DerivedRole    string                 `json:"derivedRole"`
	Operations     []string               `json:"operations,omitempty"`
	Claimed        bool                   `json:"claimed"`
	ClaimedByYou   bool                   `json:"claimedByYou"`
}

// inspect is the worker's neutral view: its registration, its own claims and, given a
// target, that target as the controller reads it.
func (t *mcpTools) inspect(ctx context.Context, in InspectInput) (*InspectOutput, error) {
	wr, err := t.o.worker(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return nil, err
	}
	out := &InspectOutput{Worker: WorkerView{Name: wr.Name, Namespace: wr.Namespace, Identity: wr.Spec.Identity,
		Repository: wr.Spec.Repository, Phase: wr.Status.Phase, OwnershipState: wr.Status.OwnershipState}, Claims: []ClaimView{}}
	list := &fleetv1alpha1.TaskClaimList{}
	if err := t.cfg.Client.List(ctx, list, client.InNamespace(t.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing task claims: %w", err)
	}
	for _, tc := range list.Items {
		if tc.Spec.Worker != wr.Name {
			continue // another worker's claims are not this worker's business
		}
		out.Claims = append(out.Claims, ClaimView{Name: tc.Name, Target: tc.Spec.Target, Phase: tc.Status.Phase, Role: tc.Status.Role,
			Capability: tc.Status.Capability, WorkBranch: workBranch(&tc), Result: tc.Status.Result, Ended: tc.Status.EndedReason})
	}
	if in.Number == 0 && in.Kind == "" {
		return out, nil
	}
	kind, repo, number, err := mcpTarget(in.Kind, in.Number, in.Repository, "")
	if err != nil {
		return nil, err
	}
	if repo == "" {
		repo = wr.Spec.Repository
	}
	gc, err := t.targetReader(ctx)
	if err != nil {
		return nil, err
	}
	st, err := gc.ReadTarget(ctx, claim.Target{Repository: repo, Kind: claim.Kind(kind), Number: number})
	if err != nil {
		return nil, fmt.Errorf("reading %s#%d: %w", repo, number, err)
	}
	role := claim.DeriveRole(st)
	v := &TargetView{Repository: st.Target.Repository, Kind: string(st.Target.Kind), Number: st.Target.Number, State: st.State,
		Merged: st.Merged, HeadSHA: st.Target.HeadSHA, BaseBranch: st.BaseBranch, ParityRevision: st.ParityRevision,
		Author: st.Author, Reviewed: st.Reviewed, Approved: st.Approved, Labels: st.Labels, Dependencies: st.Dependencies,
		DerivedRole: string(role), Operations: claim.OperationsFor(role), Claimed: st.ClaimRecord != nil}
	if st.ClaimRecord != nil {
		v.ClaimedByYou = st.ClaimRecord.Worker == wr.Name
	}
	out.Target = v
	return out, nil
}

// targetReader reads targets the way the controller does (internal/giteaclaim), with the
// worker's read credentials: --gitea-url and its token, else the gateway.
func (t *mcpTools) targetReader(ctx context.Context) (*giteaclaim.Client, error) {
	if t.cfg.GiteaURL != "" {
		return giteaclaim.New(t.cfg.GiteaURL, t.cfg.GiteaToken)
	}
	if t.cfg.GatewayURL == "" {
		return nil, errors.New("no Gitea to read: pass --gitea-url or --gateway-url")
	}
	tok, err := t.gatewayToken(ctx)
	if err != nil {
		return nil, err
	}
	return giteaclaim.New(t.cfg.GatewayURL, tok)
}

// --- claims -----------------------------------------------------------------------------

// ClaimInput names the target to claim.
type ClaimInput struct {
	Kind       string `json:"kind" jsonschema:"issue or pr"`
	Number     int64  `json:"number" jsonschema:"issue or pull request number"`
	Repository string `json:"repository,omitempty" jsonschema:"owner/name of the target's repository (default: your registration's repository)"`
	Head       string `json:"head,omitempty" jsonschema:"pull request head commit you inspected (default: its current head)"`
}

// mcpTarget reads a tool's target as the claim command reads its arguments.
func mcpTarget(kind string, number int64, repository, head string) (string, string, int64, error) {
	k, _, n, err := parseClaimArgs([]string{kind, fmt.Sprint(number)}, head)
	if err != nil {
		return "", "", 0, err
	}
	if repository != "" && !repoPattern.MatchString(repository) {
		return "", "", 0, usageErrorf("repository %q is not owner/name", repository)
	}
	return k, repository, n, nil
}

// ClaimOutput is an active claim.
type ClaimOutput struct {
	Claim      string                       `json:"claim"`
	Capability fleetv1alpha1.TaskCapability `json:"capability"`
	// WorkBranch is the branch an author pushes to and opens its pull request from.
	WorkBranch string `json:"workBranch,omitempty"`
}

// claim claims a target as the claim command does, and waits for the decision.
func (t *mcpTools) claim(ctx context.Context, in ClaimInput) (*ClaimOutput, error) {
	kind, repo, number, err := mcpTarget(in.Kind, in.Number, in.Repository, in.Head)
	if err != nil {
		return nil, err
	}
	wr, err := t.o.worker(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return nil, err
	}
	gf := giteaFlags{resolved: true, giteaURL: t.cfg.GiteaURL, token: t.cfg.GiteaToken, gatewayURL: t.cfg.GatewayURL}
	if t.cfg.GiteaURL != "" && t.cfg.GiteaToken == "" {
		gf.giteaURL = "" // no read token: read through the gateway, if any
	}
	tgt, err := t.o.resolveTarget(ctx, t.cfg.Client, wr, &gf, repo, kind, number, in.Head)
	if err != nil {
		return nil, err
	}
	got, err := t.o.acquire(ctx, t.cfg.Client, t.cfg.Namespace, claimRequest{worker: wr.Name, target: tgt, timeout: t.cfg.Timeout}, &progress{})
	if err != nil {
		return nil, err
	}
	return &ClaimOutput{Claim: got.Name, Capability: *got.Status.Capability, WorkBranch: workBranch(got)}, nil
}

// EndInput names a claim to end (default: the worker's open claim).
type EndInput struct {
	Claim string `json:"claim,omitempty" jsonschema:"claim name (default: your open claim)"`
}

// EndOutput is an ended claim.
type EndOutput struct {
	Claim       string `json:"claim"`
	Phase       string `json:"phase"`
	EndedReason string `json:"endedReason,omitempty"`
}

// release gives a claim back.
func (t *mcpTools) release(ctx context.Context, in EndInput) (*EndOutput, error) {
	return t.end(ctx, in, false)
}

// complete reports a claim's work cycle finished.
func (t *mcpTools) complete(ctx context.Context, in EndInput) (*EndOutput, error) {
	return t.end(ctx, in, true)
}

// end releases or completes the worker's open claim (or the named one) and waits until
// it has ended.
func (t *mcpTools) end(ctx context.Context, in EndInput, complete bool) (*EndOutput, error) {
	var args []string
	if in.Claim != "" {
		args = []string{in.Claim}
	}
	tc, err := pickClaim(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker, args, complete)
	if err != nil {
		return nil, err
	}
	got, err := t.o.endClaim(ctx, t.cfg.Client, tc, complete, t.cfg.Timeout, &progress{})
	if err != nil {
		return nil, err
	}
	return &EndOutput{Claim: got.Name, Phase: got.Status.Phase, EndedReason: got.Status.EndedReason}, nil
}

// --- writes through the gateway ---------------------------------------------------------

// gatewayToken is a gateway token of the worker's ServiceAccount, minted for an hour and
// reused while it has more than five minutes left.
func (t *mcpTools) gatewayToken(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Until(t.tokenExp) > 5*time.Minute {
		return t.token, nil
	}
	tr, err := t.o.gatewayToken(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker, time.Hour)
	if err != nil {
		return "", err
	}
	t.token, t.tokenExp = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return t.token, nil
}

// writeTarget is where a write goes: the given number, else the active claim's target,
// in the worker's repository; head is the claim's bound head (for pull requests).
type writeTarget struct {
	owner, name string
	number      int64
	head        string
}

// target picks the write's target. It is no permission check: the gateway decides.
func (t *mcpTools) target(ctx context.Context, number int64) (writeTarget, error) {
	wr, err := t.o.worker(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return writeTarget{}, err
	}
	owner, name, _ := strings.Cut(wr.Spec.Repository, "/")
	wt := writeTarget{owner: owner, name: name, number: number}
	open, err := openClaims(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return wt, err
	}
	for _, tc := range open {
		if c := tc.Status.Capability; c != nil && (number == 0 || c.Target.Number == number) {
			wt.number, wt.head = c.Target.Number, c.Target.HeadSHA
			if o, n, ok := strings.Cut(c.Repository, "/"); ok {
				wt.owner, wt.name = o, n
			}
			return wt, nil
		}
	}
	if number == 0 {
		return wt, errors.New("no active claim: claim a task first (the gateway refuses writes without one)")
	}
	return wt, nil
}

// gateway returns an SDK client for the gateway and the recorder of its refusals.
func (t *mcpTools) gateway(ctx context.Context) (*gitea.Client, *refusalRecorder, error) {
	if t.cfg.GatewayURL == "" {
		return nil, nil, errNoGateway
	}
	tok, err := t.gatewayToken(ctx)
	if err != nil {
		return nil, nil, err
	}
	rr := &refusalRecorder{}
	sdk, err := newGiteaClient(ctx, t.cfg.GatewayURL, tok, rr)
	return sdk, rr, err
}

// WriteOutput is a write the gateway forwarded.
type WriteOutput struct {
	Done   string `json:"done"`
	ID     int64  `json:"id,omitempty"`
	URL    string `json:"url,omitempty"`
	Number int64  `json:"number"`
}

// CommentInput is a comment.
type CommentInput struct {
	Number int64  `json:"number,omitempty" jsonschema:"issue or pull request number (default: your claimed target)"`
	Body   string `json:"body" jsonschema:"comment text (markdown)"`
}

// comment comments on the claimed target (or the given number) through the gateway.
func (t *mcpTools) comment(ctx context.Context, in CommentInput) (*WriteOutput, error) {
	if strings.TrimSpace(in.Body) == "" {
		return nil, errors.New("body must not be empty")
	}
	wt, err := t.resolve(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	sdk, rr, err := t.gateway(ctx)
	if err != nil {
		return nil, err
	}
	c, _, err := sdk.CreateIssueComment(wt.owner, wt.name, wt.number, gitea.CreateIssueCommentOption{Body: in.Body})
	if err != nil {
		return nil, rr.typed(err)
	}
	return &WriteOutput{Done: "commented", ID: c.ID, URL: c.HTMLURL, Number: wt.number}, nil
}

// ReviewInput is a review.
type ReviewInput struct {
	Number         int64  `json:"number,omitempty" jsonschema:"pull request number (default: your claimed pull request)"`
	Body           string `json:"body" jsonschema:"review text"`
	RequestChanges bool   `json:"requestChanges,omitempty" jsonschema:"request changes instead of commenting"`
}

// review comments on or requests changes to a pull request.
func (t *mcpTools) review(ctx context.Context, in ReviewInput) (*WriteOutput, error) {
	state := gitea.ReviewStateComment
	if in.RequestChanges {
		state = gitea.ReviewStateRequestChanges
	}
	return t.doReview(ctx, in.Number, in.Body, state)
}

// ApproveInput is an approval.
type ApproveInput struct {
	Number int64  `json:"number,omitempty" jsonschema:"pull request number (default: your claimed pull request)"`
	Body   string `json:"body,omitempty" jsonschema:"approval text"`
}

// approve approves a pull request.
func (t *mcpTools) approve(ctx context.Context, in ApproveInput) (*WriteOutput, error) {
	return t.doReview(ctx, in.Number, in.Body, gitea.ReviewStateApproved)
}

// doReview submits a review of the given state through the gateway.
func (t *mcpTools) doReview(ctx context.Context, number int64, body string, state gitea.ReviewStateType) (*WriteOutput, error) {
	if state != gitea.ReviewStateApproved && strings.TrimSpace(body) == "" {
		return nil, errors.New("body must not be empty")
	}
	wt, err := t.resolve(ctx, number)
	if err != nil {
		return nil, err
	}
	sdk, rr, err := t.gateway(ctx)
	if err != nil {
		return nil, err
	}
	r, _, err := sdk.CreatePullReview(wt.owner, wt.name, wt.number, gitea.CreatePullReviewOptions{State: state, Body: body, CommitID: wt.head})
	if err != nil {
		return nil, rr.typed(err)
	}
	what := "reviewed"
	if state == gitea.ReviewStateApproved {
		what = "approved"
	}
	return &WriteOutput{Done: what, ID: r.ID, URL: r.HTMLURL, Number: wt.number}, nil
}

// MergeInput is a merge.
type MergeInput struct {
	Number int64  `json:"number,omitempty" jsonschema:"pull request number (default: your claimed pull request)"`
	Style  string `json:"style,omitempty" jsonschema:"merge, rebase, rebase-merge or squash (default merge)"`
}

// merge merges the claimed pull request at the claimed head through the gateway.
func (t *mcpTools) merge(ctx context.Context, in MergeInput) (*WriteOutput, error) {
	style := gitea.MergeStyle(in.Style)
	switch style {
	case "":
		style = gitea.MergeStyleMerge
	case gitea.MergeStyleMerge, gitea.MergeStyleRebase, gitea.MergeStyleRebaseMerge, gitea.MergeStyleSquash:
	default:
		return nil, fmt.Errorf("style %q: use merge, rebase, rebase-merge or squash", in.Style)
	}
	wt, err := t.resolve(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	sdk, rr, err := t.gateway(ctx)
	if err != nil {
		return nil, err
	}
	ok, _, err := sdk.MergePullRequest(wt.owner, wt.name, wt.number, gitea.MergePullRequestOption{Style: style, HeadCommitId: wt.head})
	if err != nil {
		return nil, rr.typed(err)
	}
	if !ok {
		// The SDK reports a refused merge as false, not as an error.
		return nil, rr.typed(errors.New("the gateway did not merge the pull request"))
	}
	return &WriteOutput{Done: "merged", Number: wt.number}, nil
}

// OpenPRInput opens a pull request.
type OpenPRInput struct {
	Head  string `json:"head,omitempty" jsonschema:"work branch to merge from (default: your author claim's work branch)"`
	Base  string `json:"base,omitempty" jsonschema:"branch to merge into (default: the repository's default branch)"`
	Title string `json:"title" jsonschema:"pull request title"`
	Body  string `json:"body,omitempty" jsonschema:"pull request body; mention the issue (Fixes #N) so the claim completes"`
}

// openPR opens a pull request from a work branch through the gateway: by default from the
// author claim's work branch into the default branch. A work branch without commits is
// named as such, rather than with Gitea's bare "not found".
func (t *mcpTools) openPR(ctx context.Context, in OpenPRInput) (*WriteOutput, error) {
	if strings.TrimSpace(in.Title) == "" {
		return nil, errors.New("title is required")
	}
	if in.Head == "" {
		tc, err := t.authorClaim(ctx)
		if err != nil {
			return nil, err
		}
		in.Head = claim.WorkBranch(tc.Namespace, tc.Name)
	}
	wt, err := t.resolve(ctx, 0)
	if err != nil {
		return nil, err
	}
	body := in.Body
	if body == "" {
		body = fmt.Sprintf("Fixes #%d\n", wt.number)
	}
	sdk, rr, err := t.gateway(ctx)
	if err != nil {
		return nil, err
	}
	if in.Base == "" {
		repo, _, err := sdk.GetRepo(wt.owner, wt.name)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", wt.owner, wt.name, rr.typed(err))
		}
		in.Base = repo.DefaultBranch
	}
	pr, _, err := sdk.CreatePullRequest(wt.owner, wt.name, gitea.CreatePullRequestOption{Head: in.Head, Base: in.Base, Title: in.Title, Body: body})
	if err != nil {
		if _, resp, berr := sdk.GetRepoBranch(wt.owner, wt.name, in.Head); berr != nil && notFound(resp) {
			return nil, fmt.Errorf("branch %s does not exist yet: commit to it first (write_file, or git push through the gateway), then open the pull request", in.Head)
		}
		return nil, rr.typed(err)
	}
	return &WriteOutput{Done: "opened", ID: pr.ID, URL: pr.HTMLURL, Number: pr.Index}, nil
}

// Every tool acts on one closed world: the worker's namespace and the fleet's Gitea
// repository.

// readOnly annotates a tool that changes nothing.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr.To(false)}
}

// writes annotates a tool that changes the cluster or Gitea: destructive when it replaces
// what was there (a merge moves the base branch), idempotent when calling it again changes
// nothing more (giving a claim back, reporting it complete).
func writes(destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{DestructiveHint: ptr.To(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr.To(false)}
}

// The closed sets of values tool inputs take, as their input schemas list them.
var (
	kinds       = map[string][]any{"kind": {kindWordIssue, kindWordPR}}
	mergeStyles = map[string][]any{"style": {string(gitea.MergeStyleMerge), string(gitea.MergeStyleRebase), string(gitea.MergeStyleRebaseMerge), string(gitea.MergeStyleSquash)}}
)

// inputSchema is the input schema the SDK infers for In, with each property named in
// enums limited to its values, so that hosts offer them and the SDK refuses others.
func inputSchema[In any](enums map[string][]any) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("the input schema of %T: %v", *new(In), err)) // the input types are fixed
	}
	for name, values := range enums {
		s.Properties[name].Enum = values
	}
	return s
}
