package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// planned reports whether the controller wrote a plan for the current spec.
func planned(p *fleetv1alpha1.RetirementPlan) bool {
	return p.Status.Outcome != "" && p.Status.ObservedGeneration == p.Generation
}

// waitPlan polls the plan until done says so.
func (o *Options) waitPlan(ctx context.Context, c client.Client, key client.ObjectKey, what string, done func(*fleetv1alpha1.RetirementPlan) bool) (*fleetv1alpha1.RetirementPlan, error) {
	pg := o.progress()
	got := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	err := o.poll(ctx, c, got, pg,
		func() string {
			return fmt.Sprintf("plan %s: %s (outcome %s)", key.Name, what, phaseOr(got.Status.Outcome))
		},
		func() (bool, error) { return done(got), nil },
		func() string { return fmt.Sprintf("plan %s: %s: not done after the timeout", key.Name, what) })
	return got, err
}

func newPlanCommand(o *Options) *cobra.Command {
	var name, remote, repository string
	var timeout time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:   "plan [--remote origin] [--canonical-repository OWNER/NAME]",
		Short: "Plan the retirement of stale registrations (a dry run) and show it",
		Long: `Create a RetirementPlan in the namespace and wait for the controller's dry run: the
candidates it would retire, and every preserved row grouped by the reason it is kept.
Nothing is retired until the plan is approved ('kubectl fleet approve PLAN').`,
		Example: `  # Plan the default namespace
  kubectl fleet plan

  # Plan namespace fleet, with each row's evidence
  kubectl fleet plan -n fleet -o wide`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if remote == "" {
				return usageErrorf("--remote must not be empty")
			}
			if repository != "" && !repoPattern.MatchString(repository) {
				return usageErrorf("--canonical-repository %q is not owner/name", repository)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive")
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			p := &fleetv1alpha1.RetirementPlan{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: remote, CanonicalRepository: repository},
			}
			if name == "" {
				p.GenerateName = "plan-"
			}
			if err := c.Create(cmd.Context(), p); err != nil {
				if apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) {
					return usageErrorf("creating the RetirementPlan: %v", err)
				}
				return fmt.Errorf("creating the RetirementPlan: %w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			got, err := o.waitPlan(ctx, c, client.ObjectKeyFromObject(p), "waiting for the plan", planned)
			if err != nil {
				return err
			}
			return out.print(o.Streams.Out, got, func(w io.Writer, wide bool) error { return printPlan(w, got, wide) })
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "Name of the RetirementPlan (default: generated, plan-xxxxx).")
	cmd.Flags().StringVar(&remote, "remote", "origin", "Gitea remote whose registry is planned.")
	cmd.Flags().StringVar(&repository, "canonical-repository", "", "owner/name binding every retired row must carry (default: the controller's repository).")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "How long to wait for the plan.")
	out = addOutputFlag(cmd)
	return cmd
}

// printPlan is the default view of a plan: the headline, the candidates, the preserved
// rows grouped by reason with counts, and the fleet snapshot.
func printPlan(w io.Writer, p *fleetv1alpha1.RetirementPlan, wide bool) error {
	s := p.Status
	fmt.Fprintf(w, "Plan %s/%s: %s; %d assessed, %d candidates, %d preserved\n",
		p.Namespace, p.Name, s.Outcome, s.AssessedCount, s.CandidateCount, s.PreservedCount)
	if s.Message != "" {
		fmt.Fprintf(w, "  %s\n", s.Message)
	}
	fmt.Fprintf(w, "\nCandidates (%d):\n", s.CandidateCount)
	if len(s.Candidates) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		printAssessments(w, s.Candidates, wide)
	}
	if int(s.CandidateCount) > len(s.Candidates) {
		fmt.Fprintf(w, "  ... and %d more\n", int(s.CandidateCount)-len(s.Candidates))
	}
	fmt.Fprintf(w, "\nPreserved (%d):\n", s.PreservedCount)
	reasons := make([]string, 0, len(s.PreservedReasonCounts))
	for r := range s.PreservedReasonCounts {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, r := range reasons {
		var rows []fleetv1alpha1.WorkerAssessment
		for _, a := range s.Preserved {
			if a.ReasonCode == r {
				rows = append(rows, a)
			}
		}
		fmt.Fprintf(w, "  %s (%d)\n", r, s.PreservedReasonCounts[r])
		printAssessments(w, rows, wide)
	}
	if snap := s.Snapshot; snap != nil {
		fmt.Fprintf(w, "\nFleet at plan time: %d live, %d stale, %d historical; live fleet safe: %t (%d blockers)\n",
			snap.LiveWorkerCount, snap.StaleWorkerCount, snap.HistoricalWorkerCount, snap.LiveFleetSafe, snap.BlockerCount)
	}
	if s.Outcome == fleetv1alpha1.OutcomePlanned && s.CandidateCount > 0 && !hasApproval(p) {
		fmt.Fprintf(w, "\nTo approve: kubectl fleet approve %s -n %s > approval.yaml (commit it), or --apply\n", p.Name, p.Namespace)
	}
	return nil
}

func hasApproval(p *fleetv1alpha1.RetirementPlan) bool { return p.Spec.Approval != nil }

func printAssessments(w io.Writer, rows []fleetv1alpha1.WorkerAssessment, wide bool) {
	tw := table(w)
	for _, a := range rows {
		fmt.Fprintf(tw, "    %s\t%s", a.WorkerIdentity, a.Detail)
		if wide && len(a.Evidence) > 0 {
			keys := make([]string, 0, len(a.Evidence))
			for k := range a.Evidence {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			ev := make([]string, 0, len(keys))
			for _, k := range keys {
				ev = append(ev, k+"="+a.Evidence[k])
			}
			fmt.Fprintf(tw, "\t%s", strings.Join(ev, " "))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// whoami is the user and groups the API server authenticates the caller as
// (`kubectl auth whoami`).
func whoami(ctx context.Context, c client.Client) (string, []string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return "", nil, fmt.Errorf("asking the API server who you are (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo.Username, r.Status.UserInfo.Groups, nil
}

// approvalFor builds the approval of plan p. It refuses a plan that is not ready to be
// approved.
func approvalFor(p *fleetv1alpha1.RetirementPlan, binding, user string, groups []string) (*fleetv1alpha1.RetirementApproval, error) {
	s := p.Status
	switch {
	case !planned(p):
		return nil, usageErrorf("plan %s is not ready: the controller has not planned it yet", p.Name)
	case p.Spec.Approval != nil:
		return nil, usageErrorf("plan %s already carries an approval (outcome %s); create a new plan to approve again", p.Name, s.Outcome)
	case s.Outcome != fleetv1alpha1.OutcomePlanned || !meta.IsStatusConditionTrue(s.Conditions, fleetv1alpha1.ReadyCondition):
		return nil, usageErrorf("plan %s is not ready for approval (outcome %s)", p.Name, s.Outcome)
	case s.CandidateCount == 0:
		return nil, usageErrorf("plan %s has no candidates: nothing to approve", p.Name)
	case int(s.CandidateCount) > len(s.CandidateWorkerIdentities):
		return nil, usageErrorf("plan %s has %d candidates, more than one approval can name (%d); retire in several plans",
			p.Name, s.CandidateCount, len(s.CandidateWorkerIdentities))
	case user == "":
		return nil, usageErrorf("no approving user: the API server did not say who you are; pass --approved-by")
	}
	a := &fleetv1alpha1.RetirementApproval{
		Binding:              binding,
		CandidateFingerprint: s.CandidateFingerprint,
		WorkerIdentities:     append([]string(nil), s.CandidateWorkerIdentities...),
		ApprovedBy:           user,
		ApprovedGroups:       append([]string(nil), groups...),
	}
	switch binding {
	case fleetv1alpha1.ApprovalBindingRegistry:
		a.RegistryFingerprint = s.RegistryFingerprint
	case fleetv1alpha1.ApprovalBindingCandidateSet:
	default:
		return nil, usageErrorf("--binding %q: use %s or %s", binding, fleetv1alpha1.ApprovalBindingCandidateSet, fleetv1alpha1.ApprovalBindingRegistry)
	}
	return a, nil
}

// approvalManifest is the plan as a GitOps repository holds it: its scope and approval,
// no status and no server-side metadata.
func approvalManifest(p *fleetv1alpha1.RetirementPlan, a *fleetv1alpha1.RetirementApproval) (*unstructured.Unstructured, error) {
	spec := *p.Spec.DeepCopy()
	spec.Approval = a
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m}}
	u.SetAPIVersion(fleetv1alpha1.GroupVersion.String())
	u.SetKind("RetirementPlan")
	u.SetName(p.Name)
	u.SetNamespace(p.Namespace)
	return u, nil
}

func newApproveCommand(o *Options) *cobra.Command {
	var binding, approvedBy string
	var approvedGroups []string
	var apply bool
	var timeout time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:   "approve PLAN [--apply]",
		Short: "Print a plan's approval as YAML for a GitOps repository, or apply it",
		Long: `Build the approval of a planned RetirementPlan: its candidate fingerprint and
candidate identities, and who approves (your user and groups, as the API server
authenticates you: a SelfSubjectReview, like 'kubectl auth whoami'). Admission accepts
the approval only from that same user, holding the approve verb on retirementplans.

By default the plan manifest with spec.approval is printed as YAML, to commit to the
repository your GitOps tool applies (its identity must then be the approver: pass
--approved-by and --approved-groups). With --apply it is applied at once and the command
waits for the controller's verdict and the apply.

Binding CandidateSet (the default) binds the candidate rows alone, so live workers'
heartbeats do not void it; Registry binds the whole registry of the namespace.`,
		Example: `  # Write the approval for review and commit
  kubectl fleet approve plan-x7k2p > gitops/fleet/plan-x7k2p.yaml

  # Approve and apply now, then wait for the result
  kubectl fleet approve plan-x7k2p --apply`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("name one plan: kubectl fleet approve PLAN")
			}
			if err := out.validate(); err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive")
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
			p := &fleetv1alpha1.RetirementPlan{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, p); err != nil {
				if apierrors.IsNotFound(err) {
					return usageErrorf("no RetirementPlan %s/%s", ns, args[0])
				}
				return err
			}
			user, groups := approvedBy, approvedGroups
			if user == "" {
				if user, groups, err = whoami(ctx, c); err != nil {
					return err
				}
			}
			a, err := approvalFor(p, binding, user, groups)
			if err != nil {
				return err
			}
			if !apply {
				m, err := approvalManifest(p, a)
				if err != nil {
					return err
				}
				return out.print(o.Streams.Out, m, func(w io.Writer, _ bool) error { return printYAML(w, m.Object) })
			}
			if err := applyApproval(ctx, c, p, a, binding, user, groups); err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			got, err := o.waitPlan(wctx, c, client.ObjectKeyFromObject(p), "waiting for the apply", func(p *fleetv1alpha1.RetirementPlan) bool {
				return p.Status.ObservedGeneration == p.Generation &&
					(p.Status.Outcome != fleetv1alpha1.OutcomePlanned || meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.StalledCondition))
			})
			if err != nil {
				return err
			}
			if err := out.print(o.Streams.Out, got, func(w io.Writer, wide bool) error { return printApplied(w, got) }); err != nil {
				return err
			}
			if got.Status.Success == nil || !*got.Status.Success || meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.StalledCondition) {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("plan %s did not apply cleanly: %s", got.Name, conditionMessage(got))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&binding, "binding", fleetv1alpha1.ApprovalBindingCandidateSet, "What the approval binds: CandidateSet or Registry.")
	cmd.Flags().StringVar(&approvedBy, "approved-by", "", "User that will apply the approval (default: you, from a SelfSubjectReview).")
	cmd.Flags().StringSliceVar(&approvedGroups, "approved-groups", nil, "That user's groups (with --approved-by).")
	cmd.Flags().BoolVar(&apply, "apply", false, "Apply the approval now and wait for the result.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for the apply (with --apply).")
	out = addOutputFlag(cmd)
	return cmd
}

// applyApproval writes approval a onto plan p, locked to the resourceVersion it was built
// from. The controller writes a plan's status after it is planned (its pages), which moves
// the resourceVersion without changing what an approval binds; so on a conflict the plan is
// read again and the patch retried when the approval built from the fresh read is the same
// one. Anything else (a new approval on the plan, other candidates) refuses.
func applyApproval(ctx context.Context, c client.Client, p *fleetv1alpha1.RetirementPlan, a *fleetv1alpha1.RetirementApproval,
	binding, user string, groups []string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		base := p.DeepCopy()
		p.Spec.Approval = a
		err := c.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return fmt.Errorf("reading the plan again: %w", err)
		}
		fresh, ferr := approvalFor(p, binding, user, groups)
		if ferr != nil {
			return ferr
		}
		if !equality.Semantic.DeepEqual(fresh, a) {
			return usageErrorf("plan %s changed while it was being approved: review it again", p.Name)
		}
		return err
	})
	var exit *ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return err
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return usageErrorf("applying the approval: %v", err)
	default:
		return fmt.Errorf("applying the approval: %w", err)
	}
}

func conditionMessage(p *fleetv1alpha1.RetirementPlan) string {
	for _, t := range []string{fleetv1alpha1.ApprovedCondition, fleetv1alpha1.ReadyCondition} {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return p.Status.Message
}

func printApplied(w io.Writer, p *fleetv1alpha1.RetirementPlan) error {
	s := p.Status
	fmt.Fprintf(w, "Plan %s/%s: %s; %d retired\n", p.Namespace, p.Name, s.Outcome, s.RetiredCount)
	if s.Message != "" {
		fmt.Fprintf(w, "  %s\n", s.Message)
	}
	for _, r := range s.Retired {
		fmt.Fprintf(w, "  retired %s\n", r)
	}
	for _, a := range s.ApplyPreserved {
		fmt.Fprintf(w, "  kept %s: %s\n", a.WorkerIdentity, a.ReasonCode)
	}
	if snap := s.PostApply; snap != nil {
		fmt.Fprintf(w, "Fleet after apply: %d live, %d stale, %d historical; live fleet safe: %t\n",
			snap.LiveWorkerCount, snap.StaleWorkerCount, snap.HistoricalWorkerCount, snap.LiveFleetSafe)
	}
	return nil
}

func printYAML(w io.Writer, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
