package cli

// `kubectl fleet mcp --http ADDR`: the worker's MCP server (the same *mcp.Server the stdio
// mode serves) over MCP's streamable HTTP transport, for agents on other machines. Every
// request is authenticated as the gateway authenticates workers: a bound ServiceAccount
// token for the gateway's audience (kubectl fleet token), checked with a TokenReview
// (gateway.Authenticator, with its cache and its per-address limit of failed reviews), and
// it must be the served worker's own.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/httpserve"
)

// MCPHTTPPath is the path the streamable HTTP transport is served at; every other path is
// 404 (to an authenticated caller: anyone else gets 401 first).
const MCPHTTPPath = "/mcp"

// mcpHTTPSessionTimeout closes an MCP session that has had no request for this long (its
// client starts a new one). Worker tokens live at most an hour.
const mcpHTTPSessionTimeout = time.Hour

// mcpHTTPFlags are the flags of the HTTP mode.
type mcpHTTPFlags struct {
	addr              string
	certFile, keyFile string
	insecurePlainHTTP bool
}

// addMCPHTTPFlags adds --http and its TLS flags to the mcp command, and says so in its help.
func addMCPHTTPFlags(cmd *cobra.Command) *mcpHTTPFlags {
	f := &mcpHTTPFlags{}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "http", "", "Serve over MCP's streamable HTTP transport on this host:port (path "+MCPHTTPPath+") instead of stdio. "+
		"Only loopback addresses, unless TLS is configured or --insecure-plain-http is given. Every request needs the worker's own token (kubectl fleet token).")
	fl.StringVar(&f.certFile, "tls-cert-file", "", "With --http: serve HTTPS with this PEM certificate (chain); reloaded when it changes.")
	fl.StringVar(&f.keyFile, "tls-key-file", "", "With --http: the PEM private key of --tls-cert-file.")
	fl.BoolVar(&f.insecurePlainHTTP, "insecure-plain-http", false, "With --http on a non-loopback address and no TLS: serve plain HTTP anyway. "+
		"The worker's token and every tool result then cross the network unencrypted.")
	cmd.Long += `

With --http HOST:PORT the same tools are served over MCP's streamable HTTP transport at
http(s)://HOST:PORT` + MCPHTTPPath + `, for an agent on another machine. Every request must carry
"Authorization: Bearer TOKEN", TOKEN being the worker's own ServiceAccount token for the
gateway's audience (kubectl fleet token; at most 1h long), which the server checks with a
TokenReview: its own credentials need to create tokenreviews (the ClusterRole
system:auth-delegator grants it). A request without a valid token is answered 401,
another worker's token 403, with a JSON body saying why. Only a loopback address is
served in plain HTTP unless --insecure-plain-http says otherwise; --tls-cert-file and
--tls-key-file serve HTTPS on any address. The URL is printed on standard error once the
server listens; SIGINT or SIGTERM shuts it down.`
	cmd.Example += `

  # For an agent on another machine: HTTPS on every interface
  kubectl fleet mcp --http :8443 --tls-cert-file tls.crt --tls-key-file tls.key
  # ... and the agent's MCP client sends: Authorization: Bearer $(kubectl fleet token)`
	return f
}

// set reports whether any HTTP flag was given (the command then serves HTTP, or says why
// it cannot).
func (f *mcpHTTPFlags) set() bool {
	return f.addr != "" || f.certFile != "" || f.keyFile != "" || f.insecurePlainHTTP
}

func (f *mcpHTTPFlags) tls() bool { return f.certFile != "" }

// validate checks the flags: plain HTTP only on a loopback address, unless the operator
// said otherwise.
func (f *mcpHTTPFlags) validate() error {
	switch {
	case f.addr == "":
		return usageErrorf("--tls-cert-file, --tls-key-file and --insecure-plain-http go with --http")
	case (f.certFile == "") != (f.keyFile == ""):
		return usageErrorf("--tls-cert-file and --tls-key-file go together")
	case f.tls() && f.insecurePlainHTTP:
		return usageErrorf("--insecure-plain-http contradicts --tls-cert-file: choose one")
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usageErrorf("--http %q: want host:port, e.g. 127.0.0.1:8765 (%v)", f.addr, err)
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	if !loopback && !f.tls() && !f.insecurePlainHTTP {
		return usageErrorf("--http %s is not a loopback address: the worker's token would cross the network in plain HTTP. "+
			"Serve HTTPS (--tls-cert-file, --tls-key-file), or pass --insecure-plain-http to accept plain HTTP on the network", f.addr)
	}
	return nil
}

// serveMCPHTTP serves the worker's MCP server over streamable HTTP until ctx ends. Unlike
// the stdio mode, it does not start for a worker it cannot act for: nobody could be
// authenticated, and an operator, not an MCP host, reads its standard error.
func (o *Options) serveMCPHTTP(ctx context.Context, cfg MCPConfig, worker string, f *mcpHTTPFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	if err := o.mcpWorker(ctx, &cfg, worker); err != nil {
		return err
	}
	if err := canReviewTokens(ctx, cfg.Client); err != nil {
		return err
	}
	log := &lockedWriter{w: o.Streams.ErrOut}
	h := newMCPHTTPHandler(o.NewMCPServer(cfg), gateway.NewAuthenticator(cfg.Client), cfg.Namespace, cfg.Worker, log)

	limits := httpserve.Limits{}
	ln, err := httpserve.Listen(f.addr, limits)
	if err != nil {
		return fmt.Errorf("--http %s: %w", f.addr, err)
	}
	if !f.tls() && !f.insecurePlainHTTP && !loopbackAddr(ln.Addr()) { // a "localhost" that is not
		_ = ln.Close()
		return usageErrorf("--http %s listens on %s, not a loopback address: serve HTTPS or pass --insecure-plain-http", f.addr, ln.Addr())
	}
	srv := httpserve.Server(h, limits)
	// Request contexts end with the command's: open SSE streams and tool calls stop on
	// SIGINT or SIGTERM, so that Shutdown does not wait for them.
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	scheme := "http"
	if f.tls() {
		cw, err := certwatcher.New(f.certFile, f.keyFile)
		if err != nil {
			_ = ln.Close()
			return usageErrorf("--tls-cert-file, --tls-key-file: %v", err)
		}
		go func() {
			if err := cw.Start(ctx); err != nil {
				log.printf("kubectl fleet mcp: the certificate watcher stopped (%v); the last certificate stays in use\n", err)
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
		ln = tls.NewListener(ln, srv.TLSConfig)
		scheme = "https"
	}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close()
		}
	}()
	log.printf("Serving MCP for worker %s/%s on %s://%s%s (Authorization: Bearer <the worker's token: kubectl fleet token>)\n",
		cfg.Namespace, cfg.Worker, scheme, ln.Addr(), MCPHTTPPath)
	err = srv.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving MCP over HTTP: %w", err)
	}
	<-stopped
	log.printf("MCP server for worker %s/%s stopped\n", cfg.Namespace, cfg.Worker)
	return nil
}

// canReviewTokens checks that the server's credentials may create TokenReviews, without
// which no request could be authenticated.
func canReviewTokens(ctx context.Context, c client.Client) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}}}
	if err := c.Create(ctx, review); err != nil {
		return fmt.Errorf("asking the API server whether these credentials may create TokenReviews: %w", err)
	}
	if !review.Status.Allowed {
		return errors.New("kubectl fleet mcp --http checks every request's token with a TokenReview, and these credentials may not " +
			"create tokenreviews.authentication.k8s.io: bind them the ClusterRole system:auth-delegator (or another that grants it)")
	}
	return nil
}

// newMCPHTTPHandler serves s at MCPHTTPPath to namespace/worker's token holders only:
// authentication comes first, for every path and method.
func newMCPHTTPHandler(s *mcp.Server, authn *gateway.Authenticator, namespace, worker string, log *lockedWriter) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MCPHTTPPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{SessionTimeout: mcpHTTPSessionTimeout}))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeMCPHTTPRefusal(w, http.StatusNotFound, "not_found", "the MCP endpoint is "+MCPHTTPPath)
	})
	// Cross-origin browser requests are refused before any TokenReview.
	return http.NewCrossOriginProtection().Handler(&mcpHTTPAuth{authn: authn,
		guard: gateway.NewAuthGuard(gateway.DefaultAuthFailureRate, gateway.DefaultAuthFailureBurst),
		want:  gateway.Caller{Namespace: namespace, Name: worker}, log: log, next: mux})
}

// mcpHTTPAuth lets through the requests of the served worker's own token.
type mcpHTTPAuth struct {
	authn *gateway.Authenticator
	guard *gateway.AuthGuard
	want  gateway.Caller
	log   *lockedWriter
	next  http.Handler
}

func (a *mcpHTTPAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, err := a.guard.Authenticate(r.Context(), a.authn, r)
	switch {
	case errors.Is(err, gateway.ErrBlocked):
		w.Header().Set("Retry-After", "1")
		writeMCPHTTPRefusal(w, http.StatusTooManyRequests, "rate_limited", "too many failed authentications from this address; slow down")
		return
	case errors.Is(err, gateway.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="kubectl fleet mcp"`)
		writeMCPHTTPRefusal(w, http.StatusUnauthorized, "unauthenticated", fmt.Sprintf(
			`present the worker's own ServiceAccount token for the audience %s (kubectl fleet token) as "Authorization: Bearer TOKEN" (%v)`,
			gateway.Audience, err))
		return
	case err != nil:
		a.log.printf("kubectl fleet mcp: a token could not be checked: %v\n", err)
		writeMCPHTTPRefusal(w, http.StatusServiceUnavailable, "token_review_failed", "the token could not be checked now; try again")
		return
	case caller != a.want:
		writeMCPHTTPRefusal(w, http.StatusForbidden, "wrong_worker", fmt.Sprintf(
			"the token is ServiceAccount %s/%s's; this MCP server serves only its own worker's token", caller.Namespace, caller.Name))
		return
	}
	// The listener's read timeout guards the unauthenticated: the worker's own SSE streams
	// and claim waits may outlast it (an expired read deadline would cancel the request).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	a.next.ServeHTTP(w, r)
}

// MCPHTTPRefusal is the JSON body of a request the HTTP mode refuses.
type MCPHTTPRefusal struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func writeMCPHTTPRefusal(w http.ResponseWriter, status int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(MCPHTTPRefusal{Reason: reason, Message: message})
}

// loopbackAddr reports whether a listener's address is a loopback one.
func loopbackAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// lockedWriter serialises the server's messages on standard error.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, format, args...)
}
