package retirement

import (
	"fmt"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// RecheckBeforeWrite is the last liveness check for one row, run right
// before its guarded update. It must affirmatively re-establish that this
// exact process is gone; anything less keeps the row:
//   - probe == nil (no prober configured) → liveness_reprobe_unavailable;
//   - the row is not on this host / boot ids unknown → host_binding_unproven /
//     boot_identity_unknown;
//   - no registered start time → incomplete_registry_identity (nothing to
//     compare against);
//   - otherwise the verdict after the same start-time comparison Plan uses:
//     unknown → pid_liveness_unknown, alive → pid_alive,
//     reused → pid_reuse_detected, gone → ok (eligible_stale_orphan).
func RecheckBeforeWrite(row Row, probe *Probe, host Host) (ok bool, reason, detail string) {
	if probe == nil {
		return false, ReasonLivenessReprobeUnavailable, "no liveness prober is available, so the process cannot be shown gone"
	}
	if blank(host.HostID) || row.HostID != host.HostID {
		return false, ReasonHostBindingUnproven, fmt.Sprintf("registered on host %q but retirement runs on host %q", row.HostID, host.HostID)
	}
	if blank(row.BootID) || blank(host.BootID) {
		return false, ReasonBootIdentityUnknown, "boot identity is unknown on the registration or on this host"
	}
	if row.StartTime == nil || row.PID <= 0 {
		return false, ReasonIncompleteIdentity, "no registered pid and start time to compare the probe against"
	}
	state, why := effectivePIDState(&row, probe, host)
	switch state {
	case fleet.PIDGone:
		return true, ReasonEligibleStaleOrphan, "re-probe confirmed the process is gone: " + why
	case fleet.PIDAlive:
		return false, ReasonPIDAlive, fmt.Sprintf("pid %d is running again: %s", row.PID, why)
	case fleet.PIDReused:
		return false, ReasonPIDReuseDetected, fmt.Sprintf("pid %d is held by another process incarnation: %s", row.PID, why)
	default:
		return false, ReasonPIDLivenessUnknown, "re-probe gave no definite answer: " + why
	}
}
