package cli

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/fleet"
)

// FleetStatus is what `status` reports: the fleet snapshot of one namespace, computed
// the way the controller computes a plan's (internal/fleet), and its open claims.
type FleetStatus struct {
	Namespace  string                  `json:"namespace"`
	ObservedAt metav1.Time             `json:"observedAt"`
	Snapshot   fleetv1alpha1.PostApply `json:"snapshot"`
	Workers    []WorkerRow             `json:"workers"`
	OpenClaims int                     `json:"openClaims"`
}

// WorkerRow is one registration in FleetStatus.
type WorkerRow struct {
	Name           string       `json:"name"`
	Identity       string       `json:"identity"`
	Phase          string       `json:"phase"`
	OwnershipState string       `json:"ownershipState"`
	PID            int64        `json:"pid"`
	Heartbeat      *metav1.Time `json:"lastHeartbeatAt,omitempty"`
}

func fleetStatus(ns string, regs []fleetv1alpha1.WorkerRegistration, claims []fleetv1alpha1.TaskClaim, now time.Time) FleetStatus {
	sum := fleet.Snapshot(apiconv.Members(regs), now)
	st := FleetStatus{Namespace: ns, ObservedAt: metav1.NewTime(now.Truncate(time.Second)), Snapshot: *apiconv.Snapshot(sum), Workers: []WorkerRow{}}
	for _, wr := range regs {
		st.Workers = append(st.Workers, WorkerRow{Name: wr.Name, Identity: wr.Spec.Identity, Phase: wr.Status.Phase,
			OwnershipState: wr.Status.OwnershipState, PID: wr.Spec.Process.PID, Heartbeat: wr.Status.LastHeartbeatAt})
	}
	sort.Slice(st.Workers, func(i, j int) bool { return st.Workers[i].Name < st.Workers[j].Name })
	for _, tc := range claims {
		if tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
			st.OpenClaims++
		}
	}
	return st
}

// object wraps FleetStatus for the -o printers (kind FleetStatus: a client-side view,
// not an API kind).
func (s FleetStatus) object() (runtime.Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(fleetv1alpha1.GroupVersion.String())
	u.SetKind("FleetStatus")
	return u, nil
}

func printStatus(w io.Writer, s FleetStatus, wide bool) error {
	tw := table(w)
	fmt.Fprintln(tw, "NAMESPACE\tLIVE\tSTALE\tHISTORICAL\tACTIVE-CLAIMS\tLIVE-FLEET-SAFE\tBLOCKERS")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%t\t%d\n", s.Namespace, s.Snapshot.LiveWorkerCount, s.Snapshot.StaleWorkerCount,
		s.Snapshot.HistoricalWorkerCount, s.OpenClaims, s.Snapshot.LiveFleetSafe, s.Snapshot.BlockerCount)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Snapshot.Blockers) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "BLOCKER\tWORKER\tDETAIL")
		for _, b := range s.Snapshot.Blockers {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Code, b.WorkerIdentity, b.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if wide && len(s.Workers) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "WORKER\tIDENTITY\tPHASE\tOWNERSHIP\tPID\tHEARTBEAT")
		for _, r := range s.Workers {
			hb := noValue
			if r.Heartbeat != nil {
				hb = r.Heartbeat.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, r.Identity, r.Phase, r.OwnershipState, r.PID, hb)
		}
		return tw.Flush()
	}
	return nil
}

func newStatusCommand(o *Options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet snapshot: live, stale and historical workers, live-fleet safety, blockers",
		Long: `Read the namespace's registrations and claims and show the fleet snapshot, computed
exactly as a plan computes it: counts, whether the live fleet is safe, and each blocker
(-o wide also lists every registration).`,
		Example: `  kubectl fleet status
  kubectl fleet status -n fleet -o wide
  kubectl fleet status -o jsonpath='{.snapshot.liveFleetSafe}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
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
			regs := &fleetv1alpha1.WorkerRegistrationList{}
			if err := c.List(cmd.Context(), regs, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("listing registrations: %w", err)
			}
			claims := &fleetv1alpha1.TaskClaimList{}
			if err := c.List(cmd.Context(), claims, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("listing task claims: %w", err)
			}
			st := fleetStatus(ns, regs.Items, claims.Items, o.Now())
			obj, err := st.object()
			if err != nil {
				return err
			}
			return out.print(o.Streams.Out, obj, func(w io.Writer, wide bool) error { return printStatus(w, st, wide) })
		},
	}
	out = addOutputFlag(cmd)
	return cmd
}
