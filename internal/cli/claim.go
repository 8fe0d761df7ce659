package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// Refusal is a claim's typed refusal: status.result of a Rejected claim. It names only
// the requested target.
type Refusal struct {
	Claim  string                    `json:"claim"`
	Result fleetv1alpha1.ClaimResult `json:"result"`
}

func (r *Refusal) Error() string {
	res := r.Result
	var b strings.Builder
	fmt.Fprintf(&b, "claim %s refused (%s", r.Claim, res.Class)
	if res.Blocker != "" {
		fmt.Fprintf(&b, ", %s", res.Blocker)
	}
	fmt.Fprintf(&b, "): %s [%s, rule %s]", res.Message, res.FailedPredicate, res.RuleID)
	if res.ContentionIsNormal {
		b.WriteString("; losing a race is normal")
	}
	b.WriteString("; inspect fresh state before choosing again (the same claim is never retried)")
	return b.String()
}

// ExitCode is the exit code of the refusal's class.
func (r *Refusal) ExitCode() int { return ClassExitCode(claim.Class(r.Result.Class)) }

// claimRequest is one claim to make.
type claimRequest struct {
	worker  string
	target  fleetv1alpha1.TaskTarget
	timeout time.Duration
}

// The words a worker names a target's kind with (aliases aside): the MCP tools' enum.
const (
	kindWordIssue = "issue"
	kindWordPR    = "pr"
)

// parseClaimArgs reads `issue N` or `pr N`, where N is a number, #number, or
// owner/name#number as users name an item across repositories. repository is the
// owner/name it names ("" when only a number was given: the caller's default).
func parseClaimArgs(args []string, head string) (kind, repository string, number int64, err error) {
	if len(args) != 2 {
		return "", "", 0, usageErrorf("expected: claim issue N | claim pr N [--head SHA] (N: 12, #12 or owner/name#12)")
	}
	switch strings.ToLower(args[0]) {
	case kindWordIssue, "issues":
		kind = fleetv1alpha1.TargetKindIssue
		if head != "" {
			return "", "", 0, usageErrorf("--head applies to pull requests only")
		}
	case kindWordPR, "pull", "pullrequest", "pull-request":
		kind = fleetv1alpha1.TargetKindPullRequest
	default:
		return "", "", 0, usageErrorf("unknown target kind %q: use issue or pr", args[0])
	}
	if repository, number, err = parseItemRef(args[1]); err != nil {
		return "", "", 0, err
	}
	if head != "" && !shaPattern.MatchString(head) {
		return "", "", 0, usageErrorf("--head %q is not a commit id (7 to 64 lowercase hex digits)", head)
	}
	return kind, repository, number, nil
}

// parseItemRef reads an issue or pull request reference: 12, #12, or owner/name#12.
func parseItemRef(ref string) (repository string, number int64, err error) {
	num := ref
	if repo, n, ok := strings.Cut(ref, "#"); ok && repo != "" {
		if !repoPattern.MatchString(repo) {
			return "", 0, usageErrorf("%q does not name a repository as owner/name#number", ref)
		}
		repository, num = repo, n
	}
	number, err = strconv.ParseInt(strings.TrimPrefix(num, "#"), 10, 64)
	if err != nil || number < 1 {
		return "", 0, usageErrorf("%q is not an issue or pull request number (12, #12 or owner/name#12)", ref)
	}
	return repository, number, nil
}

// pickRepository is the repository a target is in: the one its reference named, else
// --repository; both given, they must agree. "" leaves the worker's binding as default.
func pickRepository(fromRef, fromFlag string) (string, error) {
	switch {
	case fromRef == "":
		return fromFlag, nil
	case fromFlag != "" && !strings.EqualFold(fromRef, fromFlag):
		return "", usageErrorf("the target names %s but --repository is %s", fromRef, fromFlag)
	}
	return fromRef, nil
}

// worker reads the worker's registration: it must exist and be Active.
func (o *Options) worker(ctx context.Context, c client.Client, ns, name string) (*fleetv1alpha1.WorkerRegistration, error) {
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usageErrorf("no WorkerRegistration %s/%s: register the worker first", ns, name)
		}
		return nil, fmt.Errorf("reading WorkerRegistration %s/%s: %w", ns, name, err)
	}
	return wr, nil
}

// claimName is the generateName prefix of a worker's claim on a target.
func claimName(worker string, t fleetv1alpha1.TaskTarget) string {
	kind := kindWordIssue
	if t.Kind == fleetv1alpha1.TargetKindPullRequest {
		kind = kindWordPR
	}
	p := fmt.Sprintf("%s-%s-%d-", worker, kind, t.Number)
	if len(p) > 200 {
		p = p[len(p)-200:]
	}
	return strings.TrimLeft(p, "-.")
}

// acquire runs the claim protocol: create, wait for validation, pin, wait for the
// decision. It returns the final object and, for a refusal, a *Refusal.
func (o *Options) acquire(ctx context.Context, c client.Client, ns string, req claimRequest, pg *progress) (*fleetv1alpha1.TaskClaim, error) {
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: claimName(req.worker, req.target), Namespace: ns},
		Spec:       fleetv1alpha1.TaskClaimSpec{Worker: req.worker, Target: req.target},
	}
	if err := c.Create(ctx, tc); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil, usageErrorf("creating the TaskClaim: %v", err)
		}
		return nil, fmt.Errorf("creating the TaskClaim: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	got, err := o.waitClaim(wctx, c, tc, pg, "waiting for validation", func(tc *fleetv1alpha1.TaskClaim) bool {
		return tc.Status.Phase == fleetv1alpha1.ClaimPhaseValidated && tc.Status.Validation != nil
	})
	if err == nil {
		base := got.DeepCopy()
		got.Spec.Pin = got.Status.Validation.Pin
		if err = c.Patch(wctx, got, client.MergeFrom(base)); err != nil {
			err = fmt.Errorf("pinning claim %s: %w", got.Name, err)
		}
	}
	if err == nil {
		got, err = o.waitClaim(wctx, c, got, pg, "waiting for the claim decision", func(tc *fleetv1alpha1.TaskClaim) bool {
			return tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive && tc.Status.Capability != nil
		})
	}
	if err != nil && wctx.Err() != nil {
		// Nobody will use a claim whose outcome the caller never saw: give it back, so
		// a late win does not hold the target until it expires.
		giveBack(c, tc)
		return got, fmt.Errorf("%w; the claim was given back", err)
	}
	return got, err
}

// giveBack sets spec.release on a claim whose wait was abandoned.
func giveBack(c client.Client, tc *fleetv1alpha1.TaskClaim) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur := &fleetv1alpha1.TaskClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil || claim.FinalPhase(cur.Status.Phase) || cur.Spec.Release {
		return
	}
	base := cur.DeepCopy()
	cur.Spec.Release = true
	_ = c.Patch(ctx, cur, client.MergeFrom(base))
}

// waitClaim polls the claim until done says so, or it ends otherwise: a refusal is a
// *Refusal, another final phase an error.
func (o *Options) waitClaim(ctx context.Context, c client.Client, tc *fleetv1alpha1.TaskClaim, pg *progress, what string,
	done func(*fleetv1alpha1.TaskClaim) bool) (*fleetv1alpha1.TaskClaim, error) {
	got := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Name: tc.Name, Namespace: tc.Namespace}}
	var final error
	err := o.poll(ctx, c, got, pg,
		func() string {
			return fmt.Sprintf("claim %s: %s (phase %s)", got.Name, what, phaseOr(got.Status.Phase))
		},
		func() (bool, error) {
			if done(got) {
				return true, nil
			}
			if !claim.FinalPhase(got.Status.Phase) {
				return false, nil
			}
			if got.Status.Phase == fleetv1alpha1.ClaimPhaseRejected && got.Status.Result != nil {
				final = &Refusal{Claim: got.Name, Result: *got.Status.Result}
			} else {
				final = fmt.Errorf("claim %s ended %s (%s)", got.Name, got.Status.Phase, phaseOr(got.Status.EndedReason))
			}
			return true, nil
		},
		func() string {
			return fmt.Sprintf("claim %s: still %s when the wait ended (%s)", tc.Name, phaseOr(got.Status.Phase), what)
		})
	if err != nil {
		return got, err
	}
	return got, final
}

func phaseOr(p string) string {
	if p == "" {
		return "none yet"
	}
	return p
}

func newClaimCommand(o *Options) *cobra.Command {
	var worker, head, repository string
	var timeout time.Duration
	var gf giteaFlags
	var out *output
	cmd := &cobra.Command{
		Use:   "claim (issue|pr) [owner/name#]N [--head SHA]",
		Short: "Claim a Gitea issue or pull request for the worker and print the capability",
		Long: `Claim one task for the worker: create the TaskClaim, wait for the controller's
validation, pin it, and wait for the decision. On success it prints the capability: role,
operations, expiry, and an author's work branch (fleet/<namespace>/<claim>: push to it
and open the pull request from it). A refusal prints the typed result (class, blocker, the failed
predicate and its rule) and exits with the class's code:

` + exitCodeTable + `

A pull request is claimed at one head: --head, or its current head as read from Gitea
(--gitea-url, else the gateway). An unknown issue or pull request is refused before any
TaskClaim is created.`,
		Example: `  # Claim issue 7 of the worker's repository
  kubectl fleet claim issue 7

  # Claim pull request 12 at the head you inspected, as JSON
  kubectl fleet claim pr 12 --head 3f2a1b0c9d8e -o json

  # Claim issue 3 of another repository served in the worker's namespace
  kubectl fleet claim issue acme/docs#3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, named, number, err := parseClaimArgs(args, head)
			if err != nil {
				return err
			}
			repository, err := pickRepository(named, repository)
			if err != nil {
				return err
			}
			if err := out.validate(); err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive")
			}
			name, err := o.workerName(worker)
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
			ctx := cmd.Context()
			wr, err := o.worker(ctx, c, ns, name)
			if err != nil {
				return err
			}
			t, err := o.resolveTarget(ctx, c, wr, &gf, repository, kind, number, head)
			if err != nil {
				return err
			}
			got, err := o.acquire(ctx, c, ns, claimRequest{worker: name, target: t, timeout: timeout}, o.progress())
			var ref *Refusal
			if errors.As(err, &ref) {
				if !out.human() && got != nil {
					_ = out.print(o.Streams.Out, got, nil)
				}
				fmt.Fprintln(o.Streams.ErrOut, ref.Error())
				return &ExitError{Code: ref.ExitCode(), Err: ref, Silent: true}
			}
			if err != nil {
				return err
			}
			return out.print(o.Streams.Out, got, func(w io.Writer, wide bool) error { return printCapability(w, got, wide) })
		},
	}
	workerFlag(cmd, &worker)
	cmd.Flags().StringVar(&head, "head", "", "Pull request head commit to claim (default: its current head in Gitea).")
	cmd.Flags().StringVar(&repository, "repository", "", "Repository of the target (default: the worker's repository binding).")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for the controller.")
	gf.add(cmd)
	out = addOutputFlag(cmd)
	return cmd
}

// printCapability is the default view of an active claim. WORK BRANCH is the branch an
// author pushes to and opens its pull request from.
func printCapability(w io.Writer, tc *fleetv1alpha1.TaskClaim, wide bool) error {
	c := tc.Status.Capability
	tw := table(w)
	fmt.Fprintf(tw, "CLAIM\tTARGET\tROLE\tOPERATIONS\tEXPIRES\tWORK BRANCH")
	if wide {
		fmt.Fprintf(tw, "\tPIN\tLEASE\tGENERATION")
	}
	fmt.Fprintln(tw)
	branch := workBranch(tc)
	if branch == "" {
		branch = noValue
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", tc.Name, targetString(c.Repository, c.Target.Kind, c.Target.Number, c.Target.HeadSHA),
		c.Role, strings.Join(c.Operations, ","), c.ExpiresAt.UTC().Format(time.RFC3339), branch)
	if wide {
		fmt.Fprintf(tw, "\t%s\t%s\t%s", c.Pin, c.LeaseName, c.LeaseGeneration)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// workBranch is the branch an active claim's capability pushes to and opens its pull
// request from: fleet/<namespace>/<claim> ("" when the capability permits no push).
func workBranch(tc *fleetv1alpha1.TaskClaim) string {
	c := tc.Status.Capability
	if c == nil || !slices.Contains(c.Operations, claim.OpPushBranch) {
		return ""
	}
	return claim.WorkBranch(tc.Namespace, tc.Name)
}

func targetString(repo, kind string, number int64, head string) string {
	s := fmt.Sprintf("%s#%d", repo, number)
	if kind == fleetv1alpha1.TargetKindPullRequest {
		s = fmt.Sprintf("%s!%d", repo, number)
		if head != "" {
			s += "@" + shortSHA(head)
		}
	}
	return s
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// workerClaims are the worker's claims not being deleted, newest first.
func workerClaims(ctx context.Context, c client.Client, ns, worker string) ([]fleetv1alpha1.TaskClaim, error) {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing task claims: %w", err)
	}
	var out []fleetv1alpha1.TaskClaim
	for _, tc := range list.Items {
		if tc.Spec.Worker == worker && tc.DeletionTimestamp == nil {
			out = append(out, tc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[j].CreationTimestamp.Before(&out[i].CreationTimestamp) })
	return out, nil
}

// openClaims are the worker's claims that are not final, newest first.
func openClaims(ctx context.Context, c client.Client, ns, worker string) ([]fleetv1alpha1.TaskClaim, error) {
	all, err := workerClaims(ctx, c, ns, worker)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(tc fleetv1alpha1.TaskClaim) bool { return claim.FinalPhase(tc.Status.Phase) }), nil
}

// pickClaim is the named claim of the worker, or its only open claim. For complete
// (completed), a worker with no open claim gets its newest claim when that one already
// ended Completed: the gateway ends a claim at the write that completes its role, before
// the worker hears back, so the complete that follows finds the cycle finished.
func pickClaim(ctx context.Context, c client.Client, ns, worker string, args []string, completed bool) (*fleetv1alpha1.TaskClaim, error) {
	if len(args) > 1 {
		return nil, usageErrorf("at most one claim name")
	}
	if len(args) == 1 {
		tc := &fleetv1alpha1.TaskClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, tc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, usageErrorf("no TaskClaim %s/%s", ns, args[0])
			}
			return nil, err
		}
		if worker != "" && tc.Spec.Worker != worker {
			return nil, usageErrorf("TaskClaim %s belongs to worker %s, not %s", tc.Name, tc.Spec.Worker, worker)
		}
		return tc, nil
	}
	if worker == "" {
		return nil, usageErrorf("name the claim, or the worker (--worker or %s)", EnvWorker)
	}
	all, err := workerClaims(ctx, c, ns, worker)
	if err != nil {
		return nil, err
	}
	var open []fleetv1alpha1.TaskClaim
	for _, tc := range all {
		if !claim.FinalPhase(tc.Status.Phase) {
			open = append(open, tc)
		}
	}
	switch len(open) {
	case 0:
		if len(all) == 0 {
			return nil, usageErrorf("worker %s has no open claim", worker)
		}
		newest := &all[0]
		if completed && newest.Status.Phase == fleetv1alpha1.ClaimPhaseCompleted {
			return newest, nil
		}
		return nil, usageErrorf("worker %s has no open claim (its newest, %s, is %s: %s)", worker, newest.Name,
			phaseOr(newest.Status.Phase), endReason(newest))
	case 1:
		return &open[0], nil
	}
	names := make([]string, 0, len(open))
	for _, tc := range open {
		names = append(names, tc.Name)
	}
	return nil, usageErrorf("worker %s has %d open claims (%s): name one", worker, len(open), strings.Join(names, ", "))
}

// endReason says why a final claim ended: its ended reason, or the reason it was refused.
func endReason(tc *fleetv1alpha1.TaskClaim) string {
	switch {
	case tc.Status.EndedReason != "":
		return tc.Status.EndedReason
	case tc.Status.Result != nil && tc.Status.Result.Class != "":
		return tc.Status.Result.Class + ", " + phaseOr(tc.Status.Result.FailedPredicate)
	}
	return noValue
}

// ended reports whether a claim is final with nothing of it left in force: a claim that
// won its lock ends its Gitea record and frees the lock after turning final
// (RecordCleared), and only then may another worker take the target.
func ended(tc *fleetv1alpha1.TaskClaim) bool {
	return claim.FinalPhase(tc.Status.Phase) && !meta.IsStatusConditionFalse(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)
}

// endClaim sets spec.release or spec.cycleComplete and waits until the claim is final
// and its record cleared.
func (o *Options) endClaim(ctx context.Context, c client.Client, tc *fleetv1alpha1.TaskClaim, complete bool, timeout time.Duration, pg *progress) (*fleetv1alpha1.TaskClaim, error) {
	if claim.FinalPhase(tc.Status.Phase) {
		if complete && tc.Status.Phase == fleetv1alpha1.ClaimPhaseCompleted {
			// Its own work already completed it (or an earlier complete did): the cycle is
			// finished, as asked. Wait only for its record to be cleared.
			return o.awaitEnd(ctx, c, tc, timeout, pg)
		}
		return nil, usageErrorf("claim %s is already %s", tc.Name, tc.Status.Phase)
	}
	base := tc.DeepCopy()
	if complete {
		tc.Spec.CycleComplete = true
	} else {
		tc.Spec.Release = true
	}
	if err := c.Patch(ctx, tc, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("updating claim %s: %w", tc.Name, err)
	}
	return o.awaitEnd(ctx, c, tc, timeout, pg)
}

// awaitEnd waits until tc is final and its record cleared.
func (o *Options) awaitEnd(ctx context.Context, c client.Client, tc *fleetv1alpha1.TaskClaim, timeout time.Duration, pg *progress) (*fleetv1alpha1.TaskClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Name: tc.Name, Namespace: tc.Namespace}}
	err := o.poll(ctx, c, got, pg,
		func() string {
			return fmt.Sprintf("claim %s: waiting for the end (phase %s)", tc.Name, phaseOr(got.Status.Phase))
		},
		func() (bool, error) { return ended(got), nil },
		func() string {
			if cleared := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.RecordClearedCondition); claim.FinalPhase(got.Status.Phase) && cleared != nil {
				return fmt.Sprintf("claim %s is %s, but its Gitea record is not cleared yet (%s: %s)", tc.Name, got.Status.Phase, cleared.Reason, cleared.Message)
			}
			return fmt.Sprintf("claim %s: not final after the timeout (phase %s)", tc.Name, phaseOr(got.Status.Phase))
		})
	return got, err
}

func newReleaseCommand(o *Options, complete bool) *cobra.Command {
	var worker string
	var timeout time.Duration
	var out *output
	use, short, example := "release [CLAIM]", "Give a claimed task back (spec.release) and wait until the claim ends and the target is free",
		`  # Release the worker's open claim
  kubectl fleet release

  # Release one claim by name
  kubectl fleet release bot-alice-1a2b3c4d-issue-7-x8k2p`
	if complete {
		use, short, example = "complete [CLAIM]", "Report the work cycle finished (spec.cycleComplete) and wait until the claim ends and the target is free",
			`  # Complete the worker's open claim
  kubectl fleet complete`
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive")
			}
			name := worker
			if name == "" {
				name = o.Getenv(EnvWorker)
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			tc, err := pickClaim(cmd.Context(), c, ns, name, args, complete)
			if err != nil {
				return err
			}
			got, err := o.endClaim(cmd.Context(), c, tc, complete, timeout, o.progress())
			if err != nil {
				return err
			}
			return out.print(o.Streams.Out, got, func(w io.Writer, _ bool) error {
				_, err := fmt.Fprintf(w, "claim %s %s (%s)\n", got.Name, strings.ToLower(got.Status.Phase), phaseOr(got.Status.EndedReason))
				return err
			})
		},
	}
	workerFlag(cmd, &worker)
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "How long to wait for the claim to end.")
	out = addOutputFlag(cmd)
	return cmd
}
