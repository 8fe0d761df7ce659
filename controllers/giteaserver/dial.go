package giteaserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Dialer makes the controller's Gitea clients for GiteaServers: the token from the
// server's Secret in the controller's namespace, the server's CA bundle, and one request
// budget per server that every client of that server shares.
type Dialer struct {
	// Reader reads the token Secrets, uncached: the manager keeps no informer on Secrets.
	Reader client.Reader
	// Namespace is the controller's own namespace, the only one tokens are read from.
	Namespace string

	mu       sync.Mutex
	limiters map[string]*budget
	clients  map[string]*dialed
}

// dialed is a client made for one generation of a server, kept for ClientReuse, with the
// transport that reaches the server outside the controller's request budget (what the
// gateway forwards workers' requests through).
type dialed struct {
	uid        types.UID
	generation int64
	made       time.Time
	client     *giteaclaim.Client
	transport  http.RoundTripper
}

// ClientReuse is how long Client hands out the same client for a server whose spec did
// not change: a token rotated in its Secret is in use within it.
const ClientReuse = time.Minute

// Client is a client for srv, as Dial makes it, reused for up to ClientReuse while srv's
// spec stays the same. A token or CA bundle Dial cannot use is an error that says why.
func (d *Dialer) Client(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (*giteaclaim.Client, error) {
	c, err := d.reuse(ctx, srv)
	if err != nil {
		return nil, err
	}
	return c.client, nil
}

// Upstream is Client with the transport that reaches srv (its CA bundle) without the
// controller's request budget: the gateway forwards workers' requests through it, and
// limits them per worker itself.
func (d *Dialer) Upstream(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (*giteaclaim.Client, http.RoundTripper, error) {
	c, err := d.reuse(ctx, srv)
	if err != nil {
		return nil, nil, err
	}
	return c.client, c.transport, nil
}

func (d *Dialer) reuse(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (*dialed, error) {
	d.mu.Lock()
	c := d.clients[srv.Name]
	d.mu.Unlock()
	if c != nil && c.uid == srv.UID && c.generation == srv.Generation && time.Since(c.made) < ClientReuse {
		return c, nil
	}
	made, transport, facts, err := d.dial(ctx, srv)
	if err != nil {
		return nil, err
	}
	if made == nil {
		return nil, fmt.Errorf("the GiteaServer %s cannot be used: %s", srv.Name, forge.JudgeServer(facts).Message)
	}
	c = &dialed{uid: srv.UID, generation: srv.Generation, made: time.Now(), client: made, transport: transport}
	d.mu.Lock()
	if d.clients == nil {
		d.clients = map[string]*dialed{}
	}
	d.clients[srv.Name] = c
	d.mu.Unlock()
	return c, nil
}

// budget is one server's request budget, kept while its rate stays the same.
type budget struct {
	rps     int32
	limiter *rate.Limiter
}

// Dial returns a client for srv, or the facts that say why none could be made (the
// token Secret or the CA bundle).
func (d *Dialer) Dial(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (*giteaclaim.Client, forge.ServerFacts, error) {
	c, _, f, err := d.dial(ctx, srv)
	return c, f, err
}

func (d *Dialer) dial(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (*giteaclaim.Client, http.RoundTripper, forge.ServerFacts, error) {
	var f forge.ServerFacts
	ref := srv.Spec.TokenSecretRef
	key := ref.Key
	if key == "" {
		key = "token"
	}
	secret := &corev1.Secret{}
	err := d.Reader.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		f.TokenProblem = fmt.Sprintf("there is no Secret %s/%s", d.Namespace, ref.Name)
		return nil, nil, f, nil
	case err != nil:
		return nil, nil, f, fmt.Errorf("reading the token Secret %s/%s: %w", d.Namespace, ref.Name, err)
	}
	token := string(secret.Data[key])
	if token == "" {
		f.TokenProblem = fmt.Sprintf("the Secret %s/%s holds no token under the key %q", d.Namespace, ref.Name, key)
		return nil, nil, f, nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if len(srv.Spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(srv.Spec.CABundle) {
			f.CAProblem = "spec.caBundle holds no PEM certificate"
			return nil, nil, f, nil
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	transport.MaxIdleConnsPerHost = 64
	hc := &http.Client{Timeout: giteaclaim.DefaultRequestTimeout, Transport: &paced{next: transport, limiter: d.limiter(srv)}}
	c, err := giteaclaim.New(srv.Spec.URL, token, giteaclaim.WithHTTPClient(hc))
	if err != nil { // the schema admits only URLs New accepts; a token with a newline would not
		f.TokenProblem = err.Error()
		return nil, nil, f, nil
	}
	return c, transport, f, nil
}

// limiter is srv's request budget: shared by every client of the server, and made anew
// when its rate changes.
func (d *Dialer) limiter(srv *fleetv1alpha1.GiteaServer) *rate.Limiter {
	rps := srv.Spec.RequestsPerSecond
	if rps <= 0 {
		rps = 20
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.limiters == nil {
		d.limiters = map[string]*budget{}
	}
	b := d.limiters[srv.Name]
	if b == nil || b.rps != rps {
		b = &budget{rps: rps, limiter: rate.NewLimiter(rate.Limit(rps), int(rps))}
		d.limiters[srv.Name] = b
	}
	return b.limiter
}

// paced waits for the server's budget before each request.
type paced struct {
	next    http.RoundTripper
	limiter *rate.Limiter
}

// RoundTrip implements http.RoundTripper.
func (p *paced) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := p.limiter.Wait(req.Context()); err != nil {
		return nil, fmt.Errorf("waiting for the server's request budget: %w", err)
	}
	return p.next.RoundTrip(req)
}
