package apiconv

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/fleet"
)

func TestRowOfAFreshRegistrationIsActive(t *testing.T) {
	st := int64(4242)
	hb := metav1.NewTime(time.Date(2026, 12, 1, 7, 0, 0, 0, time.FixedZone("x", 3600)))
	wr := &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "17"},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-1", HeartbeatTTLSeconds: 900,
			Process: fleetv1alpha1.ProcessIdentity{HostID: "h", BootID: "b", PID: 7, StartTime: &st}},
		Status: fleetv1alpha1.WorkerRegistrationStatus{LastHeartbeatAt: &hb},
	}
	row := Row(wr)
	if row.Phase != fleet.Active || row.ResourceVersion != "17" || row.LastHeartbeatAt != "2026-12-01T06:00:00Z" ||
		string(row.HeartbeatTTLSeconds) != "900" || row.PID != 7 || *row.StartTime != 4242 {
		t.Fatalf("Row = %+v", row)
	}
	if m := Members([]fleetv1alpha1.WorkerRegistration{*wr})[0]; m.Phase != fleet.Active {
		t.Fatalf("Member phase = %q", m.Phase)
	}
	if w := Worker(wr); w.Phase != fleet.Active || w.Name != "w" {
		t.Fatalf("Worker = %+v", w)
	}
}

func TestCapabilityRoundTrip(t *testing.T) {
	c := &claim.Capability{Worker: "w", Identity: "carol", Repository: "acme/widgets",
		Target: claim.Target{Repository: "acme/widgets", Kind: claim.KindPullRequest, Number: 9, HeadSHA: "abc"},
		Role:   claim.RoleReviewer, Operations: []string{claim.OpReview, claim.OpComment}, Pin: "sha256:p",
		ParityRevision: "base", ClaimID: "uid", LeaseName: "fleet-claim-x", LeaseGeneration: "12",
		ExpiresAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	tc := &fleetv1alpha1.TaskClaim{Status: fleetv1alpha1.TaskClaimStatus{
		Capability: CapabilityStatus(c), Validation: &fleetv1alpha1.ClaimValidation{ParityRevision: "base"}}}
	got := Capability(tc)
	got.ExpiresAt = got.ExpiresAt.UTC()
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
	if Capability(&fleetv1alpha1.TaskClaim{}) != nil {
		t.Fatal("a claim without capability yields one")
	}
}

func TestHoldings(t *testing.T) {
	now := metav1.Now()
	claims := []fleetv1alpha1.TaskClaim{
		{Spec: fleetv1alpha1.TaskClaimSpec{Worker: "a"}, Status: fleetv1alpha1.TaskClaimStatus{Phase: claim.PhaseActive}},
		{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: fleetv1alpha1.TaskClaimSpec{Worker: "b"}},
	}
	want := []claim.Holding{{Worker: "a", Phase: claim.PhaseActive}, {Worker: "b", Deleting: true}}
	if got := Holdings(claims); !reflect.DeepEqual(got, want) {
		t.Fatalf("Holdings = %+v, want %+v", got, want)
	}
}

// A pod worker's pid is its pod's namespace pid: the probe target carries the pod, so
// the prober resolves it instead of reading the host's pid of that number.
func TestProbeTargetOfAPodWorker(t *testing.T) {
	st := int64(9000)
	wr := &fleetv1alpha1.WorkerRegistration{Spec: fleetv1alpha1.WorkerRegistrationSpec{Process: fleetv1alpha1.ProcessIdentity{
		HostID: "h", BootID: "b", PID: 7, StartTime: &st,
		Pod: &fleetv1alpha1.PodProcess{Namespace: "ns", Name: "w-0", UID: "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b", NodeName: "node1"},
	}}}
	got := ProbeTarget(wr)
	if got.Pod == nil || got.Pod.UID != wr.Spec.Process.Pod.UID || got.PID != 7 || got.HostID != "h" || *got.StartTime != st {
		t.Fatalf("ProbeTarget = %+v", got)
	}
	wr.Spec.Process.Pod = nil
	if got := ProbeTarget(wr); got.Pod != nil {
		t.Fatalf("a host worker's target names a pod: %+v", got)
	}
}
