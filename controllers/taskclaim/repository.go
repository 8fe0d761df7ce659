package taskclaim

import (
	"context"
	"errors"
	"fmt"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Repositories finds a claim's repository among the GiteaRepositories of its namespace
// and gives the client of a GiteaServer (controllers/gitearepository.Resolver).
type Repositories interface {
	Resolve(ctx context.Context, namespace, name string) (forge.Resolution, error)
	Client(ctx context.Context, server string) (*giteaclaim.Client, error)
}

// errNoFlagsRepository: a claim of the flags' repository, on a manager started without
// --gitea-url and --repository.
var errNoFlagsRepository = errors.New("the claim is in the repository of the --gitea-url and --repository flags, which this manager was started without")

// resolve finds the repository tc's target names, as things stand: a GiteaRepository of
// tc's namespace that names it (Repositories), else the flags' repository (Repository, on
// Gitea). The answer is a refusal when neither serves it (claim.RepositoryNotServed), when
// the GiteaRepository is not fit for claims (claim.RepositoryNotReady; an Event says
// why), or, when deciding (a validation or a claim), when the flags' rule set is not in
// force (claim.RuleSetUnpublished). A refusal is final: nothing is guessed. It also says
// how many claims of the repository may hold an active capability at once: its
// GiteaRepository's spec.maxActiveClaims (0: no cap).
func (r *Reconciler) resolve(ctx context.Context, tc *fleetv1alpha1.TaskClaim, deciding bool) (*fleetv1alpha1.ClaimRepository, int, *claim.Result, error) {
	target := apiconv.Target(tc.Spec.Target)
	var res forge.Resolution
	if r.Repositories != nil {
		var err error
		if res, err = r.Repositories.Resolve(ctx, tc.Namespace, target.Repository); err != nil {
			return nil, 0, nil, err
		}
	}
	flags := ""
	if r.Gitea != nil {
		flags = r.Repository
	}
	switch forge.Serve(res, target.Repository, flags) {
	case forge.NotReady:
		r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonRepositoryNotReady, "Resolve", "%s", res.Problem)
		refusal := claim.RepositoryNotReady(target)
		return nil, 0, &refusal, nil
	case forge.ServedByObject:
		key := claim.RepositoryKey{Server: res.Repository.Server, ID: res.Repository.ID}
		return &fleetv1alpha1.ClaimRepository{Server: key.Server, ID: key.ID, LockName: claim.LockName(key, target)}, int(res.Repository.MaxActiveClaims), nil, nil
	case forge.NotServed:
		refusal := claim.RepositoryNotServed(target)
		return nil, 0, &refusal, nil
	}
	if deciding && r.rulesNotInForce(ctx) {
		refusal := claim.RuleSetUnpublished(target)
		return nil, 0, &refusal, nil
	}
	return &fleetv1alpha1.ClaimRepository{LockName: claim.LockName(claim.RepositoryKey{}, target)}, 0, nil, nil
}

// repositoryOf is the repository tc's validation found: the one every later step of the
// claim works on. A claim validated before claims recorded theirs is in the flags'
// repository.
func repositoryOf(tc *fleetv1alpha1.TaskClaim) fleetv1alpha1.ClaimRepository {
	if tc.Status.Repository != nil {
		return *tc.Status.Repository
	}
	return fleetv1alpha1.ClaimRepository{LockName: claim.LockName(claim.RepositoryKey{}, apiconv.Target(tc.Spec.Target))}
}

// keyOf is the key of a recorded repository.
func keyOf(rec fleetv1alpha1.ClaimRepository) claim.RepositoryKey {
	return claim.RepositoryKey{Server: rec.Server, ID: rec.ID}
}

// giteaOf is the client of the server tc's repository is on.
func (r *Reconciler) giteaOf(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (Gitea, error) {
	rec := repositoryOf(tc)
	if rec.Server == "" {
		if r.Gitea == nil {
			return nil, errNoFlagsRepository
		}
		return r.Gitea, nil
	}
	if r.Repositories == nil {
		return nil, fmt.Errorf("the claim is in a repository of the GiteaServer %s, and this manager serves no GiteaRepositories", rec.Server)
	}
	c, err := r.Repositories.Client(ctx, rec.Server)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// stillThere re-resolves the repository of a claiming (deciding) or active tc: it
// returns a refusal when the repository is no longer served as it was at validation (its
// GiteaRepository not Ready, deleted, or naming another repository now), and otherwise
// the repository's cap on active claims as it stands now (0: none).
func (r *Reconciler) stillThere(ctx context.Context, tc *fleetv1alpha1.TaskClaim, deciding bool) (int, *claim.Result, error) {
	now, limit, refused, err := r.resolve(ctx, tc, deciding)
	if err != nil || refused != nil {
		return 0, refused, err
	}
	if was := repositoryOf(tc); keyOf(*now) != keyOf(was) || now.LockName != was.LockName {
		r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonRepositoryNotReady, "Resolve",
			"%s now names another repository (%s) than at validation (%s)", tc.Spec.Target.Repository, describe(*now), describe(was))
		moved := claim.RepositoryMoved(apiconv.Target(tc.Spec.Target))
		return 0, &moved, nil
	}
	return limit, nil, nil
}

// describe renders a recorded repository for a message.
func describe(rec fleetv1alpha1.ClaimRepository) string {
	if rec.Server == "" {
		return "the flags' repository"
	}
	return fmt.Sprintf("ID %d on %s", rec.ID, rec.Server)
}
