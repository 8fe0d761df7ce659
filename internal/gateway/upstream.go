package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Repositories finds a repository among the GiteaRepositories of a namespace, as claims
// there are decided (forge.Resolve), and the GiteaServer it is on
// (controllers/gitearepository.Resolver).
type Repositories interface {
	Resolve(ctx context.Context, namespace, name string) (forge.Resolution, error)
	Upstream(ctx context.Context, server string) (Server, error)
}

// Server is one Gitea server the gateway forwards to.
type Server struct {
	// URL is its base URL.
	URL string
	// Transport reaches it (with its CA bundle).
	Transport http.RoundTripper
	// Gitea is the controller's client there: the reads a decision needs, and the check
	// of an identity's token.
	Gitea *giteaclaim.Client
}

// upstream is where one worker's requests go: the repository its registration is bound
// to, on the server that holds it.
type upstream struct {
	// server is the GiteaServer's name, "" for the flags' server.
	server string
	// key is the repository's key (claim.RepositoryKey; zero for the flags' repository),
	// and repository its canonical "owner/name".
	key        claim.RepositoryKey
	repository string
	base       *url.URL
	transport  http.RoundTripper
	gitea      *giteaclaim.Client
}

// upstreamOf finds where wr's requests go, as its claims are decided: a GiteaRepository
// of wr's namespace that names its bound repository, else the flags' repository. When
// neither serves it (claim.ReasonWrongRepository), or the GiteaRepository is not fit for
// claims (claim.ReasonRepositoryNotReady), the answer is that refusal, with a message
// that says why the repository's server cannot be told: the gateway never guesses one.
func (g *Gateway) upstreamOf(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration) (*upstream, *refusal, error) {
	bound := strings.TrimSpace(wr.Spec.Repository)
	var res forge.Resolution
	if g.Repositories != nil && bound != "" {
		var err error
		if res, err = g.Repositories.Resolve(ctx, wr.Namespace, bound); err != nil {
			return nil, nil, err
		}
	}
	flags := ""
	if g.flags != nil {
		flags = g.flags.repository
	}
	switch forge.Serve(res, bound, flags) {
	case forge.NotReady:
		return nil, &refusal{reason: claim.ReasonRepositoryNotReady, message: fmt.Sprintf(
			"the server of your bound repository %s cannot be told now: %s", bound, res.Problem)}, nil
	case forge.ServedByObject:
		srv, err := g.Repositories.Upstream(ctx, res.Repository.Server)
		if err != nil {
			return nil, nil, err
		}
		base, err := baseURL(srv.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("the GiteaServer %s: %w", res.Repository.Server, err)
		}
		return &upstream{server: res.Repository.Server,
			key:        claim.RepositoryKey{Server: res.Repository.Server, ID: res.Repository.ID},
			repository: res.Repository.Owner + "/" + res.Repository.Repo,
			base:       base, transport: srv.Transport, gitea: srv.Gitea}, nil, nil
	case forge.ServedByFlags:
		return g.flags, nil, nil
	}
	return nil, &refusal{reason: claim.ReasonWrongRepository, message: fmt.Sprintf(
		"no GiteaRepository of your namespace names your bound repository %q, and the gateway serves no other", bound)}, nil
}

// refusal is a typed refusal with its message.
type refusal struct{ reason, message string }

// serverOf is the controller's client on the server the claim tc was decided on.
func (g *Gateway) serverOf(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (*giteaclaim.Client, error) {
	key := apiconv.ClaimRepositoryKey(tc)
	if key.Named() {
		if g.flags == nil {
			return nil, fmt.Errorf("the claim %s is in the flags' repository, which this gateway does not serve", tc.Name)
		}
		return g.flags.gitea, nil
	}
	if g.Repositories == nil {
		return nil, fmt.Errorf("the claim %s is in a repository of the GiteaServer %s, which this gateway does not serve", tc.Name, key.Server)
	}
	srv, err := g.Repositories.Upstream(ctx, key.Server)
	if err != nil {
		return nil, err
	}
	return srv.Gitea, nil
}

// baseURL parses a Gitea base URL.
func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the Gitea URL %q must be http(s)://host[:port]", raw)
	}
	return u, nil
}

// upstreamTransport sends each forwarded request through the transport of the server it
// was routed to.
type upstreamTransport struct{}

// RoundTrip implements http.RoundTripper.
func (upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, ok := req.Context().Value(actingKey{}).(acting)
	if !ok || a.up == nil {
		return nil, fmt.Errorf("a forwarded request without its upstream")
	}
	return a.up.transport.RoundTrip(req)
}
