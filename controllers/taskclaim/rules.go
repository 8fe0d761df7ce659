package taskclaim

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// DefaultRuleSetRecheck is how often the published rule set is read back again.
const DefaultRuleSetRecheck = time.Minute

// RuleFiles publishes and reads files in the repository (internal/giteaclaim).
type RuleFiles = giteaclaim.RuleFiles

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
	return giteaclaim.PublishRuleSet(ctx, p.Files, p.Repository)
}

// Verified reports whether the last read-back showed the rule set in force; checked is
// false before the first attempt finished.
func (p *RulePublisher) Verified() (verified, checked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verified, p.checked
}

// rulePublisher is the reconciler's publisher for the flags' repository: Rules, or one
// made on first use (a reconciler driven without a manager).
func (r *Reconciler) rulePublisher() *RulePublisher {
	r.rulesInit.Do(func() {
		if r.Rules == nil {
			r.Rules = &RulePublisher{Files: r.Gitea, Repository: r.Repository}
		}
	})
	return r.Rules
}

// rulesNotInForce says whether the rule set published in the flags' repository is not
// verified, so a validation or claim there must be refused (fail closed). Before the
// publisher's first attempt finished it makes that attempt itself, so a claim that
// arrives while the manager starts waits for it instead of being refused. Other steps
// (re-checks, release, deletion) never wait for the rules. (A GiteaRepository's rule set
// is part of its readiness: forge.Resolve.)
func (r *Reconciler) rulesNotInForce(ctx context.Context) bool {
	p := r.rulePublisher()
	verified, checked := p.Verified()
	if !checked {
		_ = p.Sync(ctx) // its failure is the refusal
		verified, _ = p.Verified()
	}
	return !verified
}
