package taskclaim

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// DefaultRuleSetRecheck is how often the published rule set is read back again.
const DefaultRuleSetRecheck = time.Minute

// RuleFiles publishes and reads files in the repository (internal/giteaclaim).
type RuleFiles interface {
	PublishFile(ctx context.Context, repo, path string, content []byte, message string) (giteaclaim.FileCommit, error)
	ReadFile(ctx context.Context, repo, path string) ([]byte, error)
}

// RulePublisher publishes the claim rule set (claim.RuleSet) to claim.RuleSetPath in
// the repository when the manager starts, reads it back, and compares the digest; it
// reads it back again every Recheck and publishes it anew when the copy there went
// missing or changed. Until a read-back showed exactly the rule set in force, and
// whenever the last one did not, Verified says no and every validation and claim is
// refused (claim.RuleSetUnpublished). It is a manager Runnable.
type RulePublisher struct {
	Files      RuleFiles
	Repository string
	// Recheck is how often the published copy is read back (DefaultRuleSetRecheck when
	// zero).
	Recheck time.Duration

	mu       sync.Mutex
	checked  bool
	verified bool
	problem  string
}

// ruleSetRetry is how soon a failed publication is tried again.
const ruleSetRetry = 5 * time.Second

// Start publishes and verifies the rule set, then re-verifies it every Recheck until ctx
// ends. A failed attempt is logged and retried within ruleSetRetry; claims are refused
// meanwhile.
func (p *RulePublisher) Start(ctx context.Context) error {
	every := p.Recheck
	if every <= 0 {
		every = DefaultRuleSetRecheck
	}
	for {
		next := every
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "The claim rule set is not published; claims are refused until it is")
			next = min(every, ruleSetRetry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// Sync publishes the rule set when the repository's copy differs, reads it back, and
// records whether the copy there is exactly the rule set in force.
func (p *RulePublisher) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.sync(ctx)
	p.checked = true
	p.verified = err == nil
	p.problem = ""
	if err != nil {
		p.problem = err.Error()
	}
	return err
}

func (p *RulePublisher) sync(ctx context.Context) error {
	data, _ := claim.RuleSet()
	fc, err := p.Files.PublishFile(ctx, p.Repository, claim.RuleSetPath, data, "Publish task-claim rule set "+claim.RuleSetDigest())
	if err != nil {
		// Another publisher (a second replica, or one whose start overlapped this one)
		// may have committed the same file a moment earlier, so this commit lost the
		// branch ref: the copy there settles it.
		if got, rerr := p.Files.ReadFile(ctx, p.Repository, claim.RuleSetPath); rerr == nil && bytes.Equal(got, data) {
			return nil
		}
		return fmt.Errorf("publishing the claim rule set: %w", err)
	}
	if !fc.Changed {
		// PublishFile read the file and found exactly these bytes: that read is the
		// read-back.
		return nil
	}
	got, err := p.Files.ReadFile(ctx, p.Repository, claim.RuleSetPath)
	if err != nil {
		return fmt.Errorf("reading the claim rule set back: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("the claim rule set read back from %s does not have digest %s", claim.RuleSetPath, claim.RuleSetDigest())
	}
	return nil
}

// Verified reports whether the last read-back showed the rule set in force; checked is
// false before the first attempt finished.
func (p *RulePublisher) Verified() (verified, checked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verified, p.checked
}

// rulePublisher is the reconciler's publisher: Rules, or one made on first use (a
// reconciler driven without a manager).
func (r *Reconciler) rulePublisher() *RulePublisher {
	r.rulesInit.Do(func() {
		if r.Rules == nil {
			r.Rules = &RulePublisher{Files: r.Gitea, Repository: r.Repository}
		}
	})
	return r.Rules
}

// refuseWithoutRules refuses a validation or claim while the published rule set is not
// verified (fail closed). Before the publisher's first attempt finished it makes that
// attempt itself, so a claim that arrives while the manager starts waits for it instead
// of being refused. Other steps (re-checks, release, deletion) never wait for the rules.
func (r *Reconciler) refuseWithoutRules(ctx context.Context, tc *fleetv1alpha1.TaskClaim, step claim.Step) (bool, error) {
	if step != claim.StepValidate && step != claim.StepClaim {
		return false, nil
	}
	p := r.rulePublisher()
	verified, checked := p.Verified()
	if !checked {
		_ = p.Sync(ctx) // its failure is the refusal below
		verified, _ = p.Verified()
	}
	if verified {
		return false, nil
	}
	return true, r.reject(ctx, tc, claim.RuleSetUnpublished(apiconv.Target(tc.Spec.Target)))
}
