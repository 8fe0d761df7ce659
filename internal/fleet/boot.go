package fleet

import "time"

// BootOutcome says which case of the boot rule decided a free pid.
type BootOutcome int

const (
	// SameBoot: the registration names this host's current boot (or one of the two boots
	// is not known, which the callers decide on before): the rule does not apply and a
	// free pid means the process is gone.
	SameBoot BootOutcome = iota
	// BootTimeUnknown: another boot, and this host's boot time is unknown.
	BootTimeUnknown
	// HeartbeatUnknown: another boot, and the registration's heartbeat is unknown.
	HeartbeatUnknown
	// HeartbeatNotBeforeBoot: another boot, and the last heartbeat is at or after the
	// start of this host's current boot.
	HeartbeatNotBeforeBoot
	// EndedBeforeBoot: another boot, and the last heartbeat predates the start of this
	// host's current boot: that boot ended before this one began.
	EndedBeforeBoot
)

// FreePIDVerdict is the boot rule, the one definition the registration's ownership and
// the retirement checks share. A pid found free proves the registered process gone only
// for a process of this boot, or of an earlier boot of this machine: one whose last
// heartbeat predates the start of this host's current boot. With a machine id cloned onto
// a second machine, "another boot" may be that machine's current one and the worker alive
// there, so any other case is unknown.
//
// regBoot and hostBoot are the boot ids of the registration and of this host (either
// blank: SameBoot, the callers' own checks decide on unknown boots), hostBootTime is when
// this host's boot began (zero: unknown), heartbeat the registration's last heartbeat
// (nil: unknown).
func FreePIDVerdict(regBoot, hostBoot string, hostBootTime time.Time, heartbeat *time.Time) (PIDState, BootOutcome) {
	switch {
	case regBoot == "" || hostBoot == "" || regBoot == hostBoot:
		return PIDGone, SameBoot
	case hostBootTime.IsZero():
		return PIDUnknown, BootTimeUnknown
	case heartbeat == nil:
		return PIDUnknown, HeartbeatUnknown
	case !heartbeat.Before(hostBootTime):
		return PIDUnknown, HeartbeatNotBeforeBoot
	}
	return PIDGone, EndedBeforeBoot
}
