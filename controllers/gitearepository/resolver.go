package gitearepository

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/giteaserver"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Resolver finds the repository a TaskClaim names among the GiteaRepositories of the
// claim's namespace (forge.Resolve decides), and gives the Gitea client of a server. It
// reads the objects from the manager's cache: a repository's Ready condition is what its
// last check wrote, and the claim's own reads of Gitea then show the state of the moment.
type Resolver struct {
	Reader client.Reader
	Dialer *giteaserver.Dialer
}

// Resolve finds the repository name ("owner/name") names in namespace.
func (r *Resolver) Resolve(ctx context.Context, namespace, name string) (forge.Resolution, error) {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return forge.Resolution{}, fmt.Errorf("listing the GiteaRepositories of %s: %w", namespace, err)
	}
	cands := make([]forge.Candidate, 0, len(list.Items))
	for i := range list.Items {
		cands = append(cands, apiconv.Candidate(&list.Items[i]))
	}
	return forge.Resolve(name, cands, claim.RuleSetDigest()), nil
}

// Client is the controller's Gitea client for the GiteaServer server. A server that is
// gone, or whose token or CA bundle cannot be used, is an error that says so.
func (r *Resolver) Client(ctx context.Context, server string) (*giteaclaim.Client, error) {
	srv := &fleetv1alpha1.GiteaServer{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: server}, srv); err != nil {
		return nil, fmt.Errorf("reading the GiteaServer %s: %w", server, err)
	}
	return r.Dialer.Client(ctx, srv)
}

// Upstream is what the gateway forwards a worker's requests to when its bound
// repository is on the GiteaServer server: the server's URL, the transport that reaches
// it (its CA bundle), and the controller's client there.
func (r *Resolver) Upstream(ctx context.Context, server string) (gateway.Server, error) {
	srv := &fleetv1alpha1.GiteaServer{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: server}, srv); err != nil {
		return gateway.Server{}, fmt.Errorf("reading the GiteaServer %s: %w", server, err)
	}
	c, transport, err := r.Dialer.Upstream(ctx, srv)
	if err != nil {
		return gateway.Server{}, err
	}
	return gateway.Server{URL: srv.Spec.URL, Transport: transport, Gitea: c}, nil
}

// SweptRepositories lists the repositories of every namespace's GiteaRepositories that
// are Ready for their generation, once per server and name, each with its server's
// client: the repositories whose orphaned claim records the sweep ends. A server whose
// client cannot be made is left out, and said so in the error.
func (r *Resolver) SweptRepositories(ctx context.Context) ([]taskclaim.SweptRepository, error) {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing GiteaRepositories: %w", err)
	}
	var out []taskclaim.SweptRepository
	seen := map[string]bool{}
	var errs []error
	for i := range list.Items {
		c := apiconv.Candidate(&list.Items[i])
		full := list.Items[i].Status.FullName
		key := c.Server + "/" + strings.ToLower(full)
		if !c.Ready || c.ID <= 0 || full == "" || seen[key] {
			continue
		}
		seen[key] = true
		gc, err := r.Client(ctx, c.Server)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, taskclaim.SweptRepository{Server: c.Server, FullName: full, Gitea: gc})
	}
	return out, errors.Join(errs...)
}
