package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// HardeningMetric is the gauge of the Gitea setup findings the Doctor last saw.
const HardeningMetric = "fleet_gitea_hardening_findings"

var hardeningFindings = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: HardeningMetric,
	Help: "Findings of the last Gitea setup check: ways a worker identity could write around the gateway (0 when none).",
})

func init() { metrics.Registry.MustRegister(hardeningFindings) }

// Doctor checks, at start and then every Interval, that the Gitea setup holds to what the
// gateway relies on (docs/gateway.md): the default branch protected, no worker identity on
// its push allowlist, no worker identity a site administrator. The worker identities are
// the logins of the gateway's credential Secrets. Each finding is logged as a warning and
// counted in HardeningMetric; nothing is changed.
type Doctor struct {
	Repository  string
	Credentials *Credentials
	Gitea       *giteaclaim.Client
	// Interval between checks (default an hour).
	Interval time.Duration
}

// NeedLeaderElection is false: every replica checks what its gateway relies on.
func (d *Doctor) NeedLeaderElection() bool { return false }

// Check reads the setup and returns the findings.
func (d *Doctor) Check(ctx context.Context) ([]string, error) {
	list := &corev1.SecretList{}
	if err := d.Credentials.Reader.List(ctx, list, client.InNamespace(d.Credentials.Namespace), client.HasLabels{LoginLabel}); err != nil {
		return nil, fmt.Errorf("listing the gateway's credentials: %w", err)
	}
	var logins []string
	for _, s := range list.Items {
		if _, other := s.Labels[ServerLabel]; other {
			continue // a GiteaServer's token: checked against that server, not this one
		}
		if l := s.Labels[LoginLabel]; l != "" && !slices.Contains(logins, l) {
			logins = append(logins, l)
		}
	}
	setup, err := d.Gitea.Setup(ctx, d.Repository, logins)
	if err != nil {
		return nil, fmt.Errorf("reading the Gitea setup of %s: %w", d.Repository, err)
	}
	return claim.CheckHardening(setup), nil
}

// Start checks until ctx is done.
func (d *Doctor) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("gitea-doctor")
	every := d.Interval
	if every <= 0 {
		every = time.Hour
	}
	for {
		findings, err := d.Check(ctx)
		switch {
		case err != nil:
			log.Error(err, "Cannot check the Gitea setup the gateway relies on")
		case len(findings) == 0:
			hardeningFindings.Set(0)
			log.Info("Gitea setup checked: no worker identity can write around the gateway", "repository", d.Repository)
		default:
			hardeningFindings.Set(float64(len(findings)))
			for _, f := range findings {
				log.Info("WARNING: a worker identity can write around the gateway; see docs/gateway.md", "repository", d.Repository, "finding", f)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
