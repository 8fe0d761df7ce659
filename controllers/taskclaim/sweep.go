package taskclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// SweepGitea is the part of the Gitea client the sweep uses.
type SweepGitea interface {
	ListRecords(ctx context.Context, repository string, since time.Time) ([]claim.PublishedRecord, error)
	Clear(ctx context.Context, t claim.Target, claimID string, final claim.RecordState, opts ...giteaclaim.PublishOption) (giteaclaim.Published, error)
	RecordTransition(ctx context.Context, t claim.Target, tr giteaclaim.Transition) (giteaclaim.Transition, error)
}

var _ SweepGitea = (*giteaclaim.Client)(nil)

// SweptRepositories lists the repositories the sweep ends orphaned records in, besides
// the flags' one (controllers/gitearepository.Resolver).
type SweptRepositories interface {
	SweptRepositories(ctx context.Context) ([]SweptRepository, error)
}

// SweptRepository is one repository whose records the sweep reads: its "owner/name" on
// a server, and that server's client.
type SweptRepository struct {
	Server, FullName string
	Gitea            SweepGitea
}

// DefaultSweepInterval is how often the sweep runs when Sweeper.Interval is zero.
const DefaultSweepInterval = 5 * time.Minute

// Sweeper ends what a claim left behind when it went without its finalizer (force-deleted,
// or lost to an outage of the controller): Gitea records still in force whose TaskClaim no
// longer exists, and claim locks that no existing claim holds. It is a manager Runnable
// that runs every Interval on the elected leader.
//
// Records are listed before claims and locks before claims, so a claim created while a
// pass runs is always seen: only what belonged to a claim gone before the listing is
// touched. A record is ended as revoked (ownership_loss) with one audit comment; a lock is
// deleted with its resourceVersion as a precondition, so a lock taken meanwhile stays.
type Sweeper struct {
	// Reader reads claims and locks straight from the API server.
	Reader client.Reader
	// Client deletes locks.
	Client client.Client
	// Gitea lists, ends and audits records in Repository, the flags' repository (none
	// when Gitea is nil).
	Gitea      SweepGitea
	Repository string
	// Repositories lists the GiteaRepositories whose records are swept too, each with its
	// server's client (none when nil). With neither, only locks are swept.
	Repositories SweptRepositories
	// TTL is the claims' lifetime: records are looked for on items updated within twice
	// of it, and a free lock is removed once it was idle that long.
	TTL time.Duration
	// Interval is the time between passes (DefaultSweepInterval when zero).
	Interval time.Duration
	Clock    clock.PassiveClock
	// SkipAssignment leaves the Gitea assignees alone. By default the write that ends an
	// orphaned record also removes its identity's assignment, as a claim's own end does.
	SkipAssignment bool
}

// Start runs a pass every Interval until ctx ends. A failed pass is logged and counted;
// the next one tries again.
func (s *Sweeper) Start(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil {
				sweepEnded.WithLabelValues("error").Inc()
				log.FromContext(ctx).Error(err, "Claim sweep failed; retrying at the next interval")
			}
		}
	}
}

// NeedLeaderElection makes the sweep run on the elected manager only.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// SweepResult is what one pass ended.
type SweepResult struct {
	// Records are the targets whose orphaned record was ended.
	Records []claim.Target
	// Locks are the names ("namespace/name") of the locks deleted.
	Locks []string
}

// Sweep runs one pass: records first, then locks. Errors of single items are joined and
// returned after the pass went over everything.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	recErr := s.sweepRecords(ctx, &res)
	lockErr := s.sweepLocks(ctx, &res)
	return res, errors.Join(recErr, lockErr)
}

// claimIDs lists every TaskClaim's uid, in every namespace.
func (s *Sweeper) claimIDs(ctx context.Context) (func(string) bool, error) {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := s.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing task claims: %w", err)
	}
	ids := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		ids[string(list.Items[i].UID)] = true
	}
	return func(id string) bool { return ids[id] }, nil
}

func (s *Sweeper) sweepRecords(ctx context.Context, res *SweepResult) error {
	var repos []SweptRepository
	if s.Gitea != nil {
		repos = append(repos, SweptRepository{FullName: s.Repository, Gitea: s.Gitea})
	}
	var errs []error
	if s.Repositories != nil {
		more, err := s.Repositories.SweptRepositories(ctx)
		if err != nil {
			errs = append(errs, err) // the repositories it did list are swept all the same
		}
		repos = append(repos, more...)
	}
	if len(repos) == 0 {
		return errors.Join(errs...)
	}
	now := s.Clock.Now()
	// Every repository's records are listed before the claims: a claim created meanwhile
	// is seen, and its record left alone.
	found := make([][]claim.PublishedRecord, len(repos))
	for i, repo := range repos {
		records, err := repo.Gitea.ListRecords(ctx, repo.FullName, now.Add(-2*s.TTL))
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the claim records of %s: %w", describeSwept(repo), err))
			continue
		}
		found[i] = records
	}
	exists, err := s.claimIDs(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i, repo := range repos {
		for _, p := range claim.OrphanedRecords(found[i], exists, now) {
			if target, ended, err := s.endOrphan(ctx, repo, p, now); err != nil {
				errs = append(errs, err)
			} else if ended {
				res.Records = append(res.Records, target)
			}
		}
	}
	return errors.Join(errs...)
}

// describeSwept names a swept repository for an error.
func describeSwept(r SweptRepository) string {
	if r.Server == "" {
		return r.FullName
	}
	return r.FullName + " on the GiteaServer " + r.Server
}

// endOrphan ends one orphaned record as revoked, with one audit comment. ended is false
// when there was nothing to end any more.
func (s *Sweeper) endOrphan(ctx context.Context, repo SweptRepository, p claim.PublishedRecord, now time.Time) (claim.Target, bool, error) {
	gitea := repo.Gitea
	var opts []giteaclaim.PublishOption
	if !s.SkipAssignment {
		opts = append(opts, giteaclaim.Assigning())
	}
	if _, err := gitea.Clear(ctx, p.Target, p.Record.ClaimID, claim.RecordStateRevoked, opts...); err != nil {
		if giteaclaim.NothingToEnd(err) {
			return p.Target, false, nil
		}
		return p.Target, false, fmt.Errorf("ending the orphaned record on %s: %w", p.Target, err)
	}
	tr := giteaclaim.Transition{Event: claim.EventRevoked, Trigger: claim.TriggerOwnershipLoss, ClaimID: p.Record.ClaimID,
		Worker: p.Record.Worker, Identity: p.Record.Identity, Role: p.Record.Role, Reason: "claim_deleted", At: now}
	if _, err := gitea.RecordTransition(ctx, p.Target, tr); err != nil {
		claimTransitions.WithLabelValues("audit_failed", string(tr.Event), repo.Server, strings.ToLower(repo.FullName)).Inc()
		log.FromContext(ctx).Error(err, "Auditing the end of an orphaned claim record failed", "target", p.Target.String())
	}
	sweepEnded.WithLabelValues("record").Inc()
	log.FromContext(ctx).Info("Ended an orphaned claim record", "target", p.Target.String(), "claimID", p.Record.ClaimID)
	return p.Target, true, nil
}

func (s *Sweeper) sweepLocks(ctx context.Context, res *SweepResult) error {
	locks := &coordinationv1.LeaseList{}
	if err := s.Reader.List(ctx, locks, client.MatchingLabels(lockLabels())); err != nil {
		return fmt.Errorf("listing claim locks: %w", err)
	}
	exists, err := s.claimIDs(ctx)
	if err != nil {
		return err
	}
	now := s.Clock.Now()
	var errs []error
	for i := range locks.Items {
		l := &locks.Items[i]
		if !claim.LockRemovable(lockView(l), exists, now, s.TTL) {
			continue
		}
		rv, uid := l.ResourceVersion, l.UID
		err := s.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &rv, UID: &uid})
		switch {
		case err == nil:
			sweepEnded.WithLabelValues("lock").Inc()
			res.Locks = append(res.Locks, l.Namespace+"/"+l.Name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// gone already, or taken meanwhile: not the sweep's any more
		default:
			errs = append(errs, fmt.Errorf("deleting claim lock %s/%s: %w", l.Namespace, l.Name, err))
		}
	}
	return errors.Join(errs...)
}

// lockView is a lock as the sweep decision sees it.
func lockView(l *coordinationv1.Lease) claim.Lock {
	v := claim.Lock{Holder: ptr.Deref(l.Spec.HolderIdentity, "")}
	for _, o := range l.OwnerReferences {
		if o.Kind == kindTaskClaim {
			v.Owners = append(v.Owners, string(o.UID))
		}
	}
	switch {
	case l.Spec.RenewTime != nil:
		v.IdleSince = l.Spec.RenewTime.Time
	case !l.CreationTimestamp.IsZero():
		v.IdleSince = l.CreationTimestamp.Time
	}
	return v
}
