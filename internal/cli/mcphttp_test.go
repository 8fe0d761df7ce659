package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// skipMCPConformance, set to 1, skips the conformance run (a machine without the npm
// registry); make test runs it.
const skipMCPConformance = "FLEET_SKIP_MCP_CONFORMANCE"

// bearerTransport sends a bearer token with every request, as a remote agent's MCP client does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// httpAgent connects an MCP client over streamable HTTP, presenting token.
func httpAgent(url, token string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "remote-agent", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
}

// initializeRequest posts an MCP initialize request as a client's first request, with the
// given Authorization header ("" for none), and returns the status and the body.
func initializeRequest(url, authorization string) (int, http.Header, string) {
	GinkgoHelper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
		`"clientInfo":{"name":"probe","version":"v0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, resp.Header, string(b)
}

// refusal decodes the server's JSON refusal.
func refusal(body string) cli.MCPHTTPRefusal {
	GinkgoHelper()
	var r cli.MCPHTTPRefusal
	Expect(json.Unmarshal([]byte(body), &r)).To(Succeed(), "a JSON refusal: %s", body)
	return r
}

var servedURL = regexp.MustCompile(`Serving MCP for worker \S+ on (http://\S+)`)

var _ = Describe("kubectl fleet mcp --http", Ordered, func() {
	var ns, worker, other, token, otherToken, url string
	var server *gexec.Session

	BeforeAll(func() {
		ns = newNamespace()
		worker = register(ns, newLogin("mcp-http"), startChild())
		other = register(ns, newLogin("mcp-http-other"), startChild())
		mint := func(name string) string {
			r := fleet(ns, append(asWorker(ns, name), "token", "--worker", name, "--duration", "10m")...)
			return strings.TrimSpace(r.stdout)
		}
		token, otherToken = mint(worker), mint(other)
		args := append(asWorker(ns, worker), "mcp", "--worker", worker, "--http", "127.0.0.1:0", "--gitea-url", srv.URL)

		By("refusing to start with credentials that cannot create TokenReviews")
		r := fleetCmd(ctx, ns, workerEnv(worker), args...)
		Expect(r.code).To(Equal(cli.ExitFailure), "%s", r)
		Expect(r.stderr).To(ContainSubstring("may not create tokenreviews.authentication.k8s.io: bind them the ClusterRole system:auth-delegator"))

		By("granting the worker's ServiceAccount TokenReviews, as the operator does")
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "mcp-http-authn-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: worker}},
		}
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), binding) })
		user, groups := testenv.ServiceAccount(ns, worker)
		asSA, err := env.Impersonate(user, groups...)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}}}
			g.Expect(asSA.Create(ctx, review)).To(Succeed())
			g.Expect(review.Status.Allowed).To(BeTrue())
		}).Should(Succeed())

		By("starting kubectl fleet mcp --http as the worker, a process of its own")
		cmd := exec.Command(selfBinary, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		cmd.Env = append(os.Environ(), asKubectlFleet+"=1", cli.EnvGiteaToken+"="+srv.Token)
		server, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { server.Kill().Wait(10 * time.Second) })
		Eventually(server.Err, time.Minute).Should(gbytes.Say(`Serving MCP for worker ` + ns + "/" + worker + ` on http://127\.0\.0\.1:\d+/mcp`))
		url = servedURL.FindStringSubmatch(string(server.Err.Contents()))[1]
	})

	It("serves the worker's tools to the worker's own token, and nothing to anyone else", func() {
		By("an agent with the worker's token calls inspect")
		cs, err := httpAgent(url, token)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cs.Close)
		tools, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		Expect(names).To(ContainElements("inspect", "claim", "release", "complete", "read_issue"))
		n := newIssue("mcp over http")
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inspect", Arguments: map[string]any{"kind": "issue", "number": n}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), "%+v", res.Content)
		b, err := json.Marshal(res.StructuredContent)
		Expect(err).NotTo(HaveOccurred())
		var out cli.InspectOutput
		Expect(json.Unmarshal(b, &out)).To(Succeed())
		Expect(out.Worker.Name).To(Equal(worker))
		Expect(out.Worker.Namespace).To(Equal(ns))
		Expect(out.Target).NotTo(BeNil())
		Expect(out.Target.Number).To(Equal(n))
		Expect(out.Target.DerivedRole).To(Equal("author"))

		By("no token: 401, saying what to present")
		code, header, body := initializeRequest(url, "")
		Expect(code).To(Equal(http.StatusUnauthorized), body)
		Expect(header.Get("WWW-Authenticate")).To(HavePrefix("Bearer "))
		Expect(refusal(body)).To(And(HaveField("Reason", "unauthenticated"), HaveField("Message", ContainSubstring("kubectl fleet token"))))

		By("a garbage token: 401")
		for _, bad := range []string{"Bearer garbage", "Bearer a.b.c", "Basic Zm9vOmJhcg==", "Bearer " + token + "x"} {
			code, _, body = initializeRequest(url, bad)
			Expect(code).To(Equal(http.StatusUnauthorized), "%s: %s", bad, body)
			Expect(refusal(body).Reason).To(Equal("unauthenticated"))
		}

		By("another worker's token: 403, naming only the caller")
		code, _, body = initializeRequest(url, "Bearer "+otherToken)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(refusal(body)).To(And(HaveField("Reason", "wrong_worker"), HaveField("Message", ContainSubstring(ns+"/"+other))))
		Expect(strings.ReplaceAll(body, other, "")).NotTo(ContainSubstring(worker), "the refusal does not name the served worker")
		_, err = httpAgent(url, otherToken)
		Expect(err).To(HaveOccurred(), "an agent with another worker's token connects to nothing")

		By("nothing else is served: other paths are 401 without the token, 404 with it")
		for _, tc := range []struct {
			auth string
			code int
		}{{"", http.StatusUnauthorized}, {"Bearer " + otherToken, http.StatusForbidden}, {"Bearer " + token, http.StatusNotFound}} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/mcp")+"/metrics", nil)
			Expect(err).NotTo(HaveOccurred())
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(tc.code), "GET /metrics with %q", tc.auth)
		}
	})

	It("passes the MCP conformance suite's applicable server scenarios (hack/mcp-conformance.sh)", func() {
		if os.Getenv(skipMCPConformance) == "1" {
			Skip(skipMCPConformance + "=1")
		}
		root, err := testenv.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		run, cancelRun := context.WithTimeout(ctx, 10*time.Minute) // a cold npm install takes about 30s
		defer cancelRun()
		var stdout bytes.Buffer
		cmd := exec.CommandContext(run, "bash", filepath.Join(root, "hack", "mcp-conformance.sh"), url)
		cmd.Env = append(os.Environ(), "MCP_CONFORMANCE_BEARER_TOKEN="+token, "MCP_CONFORMANCE_OUTPUT="+GinkgoT().TempDir())
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, GinkgoWriter), GinkgoWriter
		Expect(cmd.Run()).To(Succeed(), "hack/mcp-conformance.sh %s: %s (its output is above)", url, stdout.String())
		Expect(stdout.String()).To(MatchRegexp(`(?m)^5 passed, 0 failed$`))
	})

	It("shuts down on SIGTERM, open sessions included", func() {
		cs, err := httpAgent(url, token)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = cs.Close() }) // the server is gone by then
		Expect(cs.Ping(ctx, nil)).To(Succeed())
		server.Signal(syscall.SIGTERM)
		Eventually(server, 15*time.Second).Should(gexec.Exit(cli.ExitOK))
		Expect(server.Err).To(gbytes.Say("stopped"))
	})
})

// TestMCPHTTPFlags: plain HTTP is served on loopback addresses only, unless TLS is
// configured or --insecure-plain-http says so; the TLS flags go together and with --http.
// Each refusal is a usage error, before the API server is reached.
func TestMCPHTTPFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:8765"}, "not a loopback address"},
		{[]string{"--http", ":8765"}, "--insecure-plain-http"},
		{[]string{"--http", "192.0.2.1:8765"}, "Serve HTTPS (--tls-cert-file, --tls-key-file)"},
		{[]string{"--http", "mcp.example.com:8765"}, "not a loopback address"},
		{[]string{"--http", "127.0.0.1"}, "want host:port"},
		{[]string{"--http", "127.0.0.1:0", "--tls-cert-file", "tls.crt"}, "go together"},
		{[]string{"--tls-cert-file", "tls.crt", "--tls-key-file", "tls.key"}, "go with --http"},
		{[]string{"--insecure-plain-http"}, "go with --http"},
		{[]string{"--http", "0.0.0.0:0", "--insecure-plain-http", "--tls-cert-file", "c", "--tls-key-file", "k"}, "contradicts"},
	} {
		var out, errOut bytes.Buffer
		o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		o.Getenv = func(string) string { return "" }
		args := append([]string{"--server", "http://127.0.0.1:1", "-n", "default", "mcp", "--worker", "w"}, tc.args...)
		if code := cli.Execute(context.Background(), o, args); code != cli.ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("mcp %s: exit %d, %q; want exit %d saying %q", strings.Join(tc.args, " "), code, errOut.String(), cli.ExitUsage, tc.want)
		}
	}
	// Accepted: past the flags, the command reaches for the (absent) API server.
	for _, args := range [][]string{{"--http", "0.0.0.0:0", "--insecure-plain-http"}, {"--http", "[::1]:0"}, {"--http", "localhost:0"}} {
		var errOut bytes.Buffer
		o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut})
		o.Getenv = func(string) string { return "" }
		all := append([]string{"--server", "http://127.0.0.1:1", "-n", "default", "--request-timeout", "5s", "mcp", "--worker", "w"}, args...)
		if code := cli.Execute(context.Background(), o, all); code != cli.ExitFailure || !strings.Contains(errOut.String(), "127.0.0.1:1") {
			t.Errorf("mcp %s: exit %d, %q; want the flags accepted and the API server unreachable (exit %d)", strings.Join(args, " "), code, errOut.String(), cli.ExitFailure)
		}
	}
}
