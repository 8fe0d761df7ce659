/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package retirement

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// requiredIdentityFields names the row fields that must be present (and, for
// numbers, positive) before any other evidence about the row is trusted.
// bootID is deliberately absent: a missing boot id has its own reason code
// (boot_identity_unknown).
var requiredIdentityFields = [...]string{
	"clientInstanceID", "workerNamespace", "identity", "remote",
	"pid", "heartbeatTTLSeconds", "hostID", "startTime",
}

// RequiredIdentityFields returns a copy of the list of fields whose absence
// yields incomplete_registry_identity.
func RequiredIdentityFields() []string {
	out := make([]string, len(requiredIdentityFields))
	copy(out, requiredIdentityFields[:])
	return out
}

// checkFunc is the test of one link of the eligibility chain. It reports
// whether the row failed it and, when it did, a human-readable detail; the
// reason code is the link's own (checkChain), written once.
// A failing check may attach evidence specific to its failure with
// rc.note; the common evidence is recorded for every row regardless.
type checkFunc func(rc *rowContext) (detail string, failed bool)

// checkChain is the eligibility conjunction in evaluation order. The order is
// chosen so that every reason code can be the first failure of some row and
// so that the reported reason is the most specific one:
//
//  1. registration state and self-contained row evidence (terminal, missing
//     identity fields, unusable heartbeat);
//  2. worker_live before any probe-specific reason, so a worker that is
//     simply healthy is reported as such;
//  3. permanent row properties (identity provenance, repository binding);
//  4. fencing: the host and boot binding come before the probe verdicts,
//     because a probe can only speak for a pid on this host and this boot
//     (a row on another host is host_binding_unproven, never
//     pid_liveness_unknown);
//  5. the probe verdicts (unknown, alive, reused — mutually exclusive);
//  6. heartbeat expiry, which can only fail here when the heartbeat is fresh
//     but a probe has shown the process gone;
//  7. the stored ownership state;
//  8. evidence shared with other registrations and task-claim protection.
var checkChain = []struct {
	code string
	fn   checkFunc
}{
	{ReasonAlreadyTerminal, checkActive},
	{ReasonIncompleteIdentity, checkIdentityComplete},
	{ReasonUnparsableHeartbeat, checkHeartbeatParses},
	{ReasonWorkerLive, checkNotLive},
	{ReasonUntrustedProvenance, checkProvenance},
	{ReasonRepositoryAmbiguous, checkRepository},
	{ReasonHostBindingUnproven, checkHostBinding},
	{ReasonBootIdentityUnknown, checkBootKnown},
	{ReasonPIDLivenessUnknown, checkProbeDefinite},
	{ReasonPIDAlive, checkProbeNotAlive},
	{ReasonPIDReuseDetected, checkPIDNotReused},
	{ReasonHeartbeatNotExpired, checkHeartbeatExpired},
	{ReasonAmbiguousOwnership, checkOwnershipStale},
	{ReasonConflictingIdentity, checkNoSharedIdentity},
	{ReasonClientInstanceConflict, checkNoClientInstanceConflict},
	{ReasonProtectedWorkflowOwner, checkNotProtected},
}

// CheckOrder returns the preserve reason codes in the order the eligibility
// chain evaluates them. A row is preserved with the first code whose check
// it fails.
func CheckOrder() []string {
	out := make([]string, len(checkChain))
	for i, c := range checkChain {
		out[i] = c.code
	}
	return out
}

// rowContext is everything the checks know about one row: the row itself,
// values derived from it once, and the planner with the cross-row indexes.
type rowContext struct {
	p   *planner
	idx int32
	row *Row

	ttl         ttlText
	ttlDur      time.Duration
	ttlPositive bool

	hb       time.Time
	hbOK     bool
	expiry   time.Time
	expiryOK bool

	probe        Probe
	hasProbe     bool
	effective    fleet.PIDState
	effectiveWhy string

	classification string
	mayBeLive      bool
	sameName       int   // rows (including this one) with this Name
	owner          bool  // the worker holds an active task claim
	missing        uint8 // see missingIdentityFields
	rank           int32 // position in canonical order
	eligible       bool  // passed every check

	expiryText             string // expiry formatted as RFC 3339 (UTC), "" when unknown
	expiryStart, expiryEnd int32  // position of expiryText in the planner's text arena
}

// note attaches a failure-specific evidence entry. Entries are buffered in
// the planner and copied into the row's evidence map once the chain stops,
// so that the map can be allocated at its final size.
func (rc *rowContext) note(key, value string) {
	rc.p.notes = append(rc.p.notes, evidenceEntry{key, value})
}

// evidenceEntry is one buffered evidence key/value pair.
type evidenceEntry struct{ key, value string }

// checkActive: only an Active registration can be retired. Retired rows (and
// rows carrying any other phase value) are left alone.
func checkActive(rc *rowContext) (string, bool) {
	if rc.row.Phase != fleet.Active {
		rc.note(EvidencePhase, rc.row.Phase)
		return "phase is " + strconv.Quote(rc.row.Phase) + "; only Active registrations are retired", true
	}
	return "", false
}

// checkIdentityComplete: every field that attributes the row to one process
// must be present: client instance id, worker namespace, identity, remote, a
// positive pid, a valid positive TTL, host id and process start time.
// Without them nothing later could be proven.
func checkIdentityComplete(rc *rowContext) (string, bool) {
	if rc.missing == 0 {
		return "", false
	}
	missing := make([]string, 0, len(requiredIdentityFields))
	for bit, name := range requiredIdentityFields {
		if rc.missing&(1<<bit) != 0 {
			missing = append(missing, name)
		}
	}
	rc.note(EvidenceMissingFields, strings.Join(missing, ","))
	rc.note(EvidenceHeartbeatTTLSeconds, rc.ttl.text)
	return "missing or invalid identity fields: " + strings.Join(missing, ", "), true
}

// missingIdentityFields returns a bit mask over requiredIdentityFields (bit i
// set = field i absent or invalid). It is computed while deriving the row,
// when its strings are already in cache.
func missingIdentityFields(r *Row, ttlPositive bool) uint8 {
	var m uint8
	set := func(bit int, missing bool) {
		if missing {
			m |= 1 << bit
		}
	}
	set(0, blank(r.ClientInstanceID))
	set(1, blank(r.WorkerNamespace))
	set(2, blank(r.Identity))
	set(3, blank(r.Remote))
	set(4, r.PID <= 0)
	set(5, !ttlPositive)
	set(6, blank(r.HostID))
	set(7, r.StartTime == nil)
	return m
}

// checkHeartbeatParses: the stored heartbeat must be an RFC 3339 timestamp
// with an explicit zone (Z or an offset); an empty or malformed value
// proves nothing about when the worker was last seen.
func checkHeartbeatParses(rc *rowContext) (string, bool) {
	if !rc.hbOK {
		rc.note(EvidenceLastHeartbeatAt, rc.row.LastHeartbeatAt)
		if rc.row.LastHeartbeatAt == "" {
			return "no heartbeat has been recorded", true
		}
		return "lastHeartbeatAt " + strconv.Quote(rc.row.LastHeartbeatAt) + " is not an RFC 3339 timestamp", true
	}
	return "", false
}

// checkNotLive: a worker whose heartbeat is still fresh at Now is live unless
// the probe withdrew liveness (process gone or pid reused). An alive or
// unknown probe neither helps nor hurts here.
func checkNotLive(rc *rowContext) (string, bool) {
	if rc.classification == fleet.Live {
		return "heartbeat is fresh until " + rc.expiryText + " and the probe (" + string(rc.effective) + ") did not show the process gone", true
	}
	return "", false
}

// checkProvenance: the client instance id must have been minted by a
// launcher (inst-…). Legacy pid-/proc- ids, or anything else, only say which
// process was nearby, not which launch the row belongs to, so such rows are
// kept until the worker registers again under a trusted id.
func checkProvenance(rc *rowContext) (string, bool) {
	if !fleet.IsTrustedInstanceID(rc.row.ClientInstanceID) {
		rc.note(EvidenceClientInstanceID, rc.row.ClientInstanceID)
		return "client instance id " + strconv.Quote(rc.row.ClientInstanceID) + " is not launcher-minted (inst-…)", true
	}
	return "", false
}

// checkRepository: the row must be bound to a repository written as exactly
// owner/name, and that name must bind, in the row's namespace, the very
// repository the plan is bound to: their canonical values (Row.Binding,
// Input.CanonicalBinding; server and Gitea repository ID for a GiteaRepository)
// are equal. Gitea owner and repository names are case-insensitive, so letter
// case is ignored; surrounding whitespace on the row is not tolerated.
func checkRepository(rc *rowContext) (string, bool) {
	r := rc.row.Repository
	fail := func(detail string) (string, bool) {
		rc.note(EvidenceRepository, r)
		rc.note(EvidenceCanonicalRepository, rc.p.canonRepo)
		if rc.row.Binding != "" {
			rc.note(EvidenceBinding, rc.row.Binding)
		}
		if rc.p.canonBinding != "" {
			rc.note(EvidenceCanonicalBinding, rc.p.canonBinding)
		}
		return detail, true
	}
	switch {
	case rc.p.in.RepositoryProblem != "":
		return fail("the plan is bound to no repository: " + rc.p.in.RepositoryProblem)
	case !rc.p.canonRepoOK:
		return fail(fmt.Sprintf("canonical repository %q is not of the form owner/name", rc.p.in.CanonicalRepository))
	case rc.p.canonBinding == "":
		return fail(fmt.Sprintf("the plan's repository %q has no canonical binding (its repository object has not resolved a Gitea repository ID)", rc.p.canonRepo))
	case r == "":
		return fail("the registration has no repository binding")
	case !isCanonicalRepository(r):
		return fail(fmt.Sprintf("repository binding %q is not of the form owner/name", r))
	case rc.row.Binding == "":
		return fail(fmt.Sprintf("repository binding %q names no repository of the namespace", r))
	case rc.row.Binding != rc.p.canonBinding:
		if !strings.EqualFold(r, rc.p.canonRepo) {
			return fail(fmt.Sprintf("repository binding %q differs from the canonical repository %q", r, rc.p.canonRepo))
		}
		return fail(fmt.Sprintf("repository binding %q resolves to %s, the plan's binding to %s", r, rc.row.Binding, rc.p.canonBinding))
	}
	return "", false
}

// checkHostBinding: process liveness can only be proven on the worker's own
// machine, so the row's host id must equal the (known) host id of the
// controller running retirement.
func checkHostBinding(rc *rowContext) (string, bool) {
	h := rc.p.in.Host
	if blank(h.HostID) {
		return "the controller does not know its own host id", true
	}
	if rc.row.HostID != h.HostID {
		return "registered on host " + strconv.Quote(rc.row.HostID) + " but retirement runs on host " + strconv.Quote(h.HostID), true
	}
	return "", false
}

// checkBootKnown: both the row and the controller's host must carry a boot
// id; without it a pid cannot be tied to one boot of the machine.
func checkBootKnown(rc *rowContext) (string, bool) {
	switch {
	case blank(rc.row.BootID) && blank(rc.p.in.Host.BootID):
		return "neither the registration nor the controller's host has a boot id", true
	case blank(rc.row.BootID):
		return "the registration has no boot id", true
	case blank(rc.p.in.Host.BootID):
		return "the controller's host boot id is unknown", true
	}
	return "", false
}

// checkProbeDefinite: the process probe must have given a definite answer;
// a missing probe or an unknown verdict fails closed.
func checkProbeDefinite(rc *rowContext) (string, bool) {
	if rc.effective == fleet.PIDUnknown {
		rc.noteProcess()
		return "process liveness could not be determined: " + rc.effectiveWhy, true
	}
	return "", false
}

// checkProbeNotAlive: a running registered process blocks retirement
// absolutely, even when its heartbeat lapsed and even across a boot change.
func checkProbeNotAlive(rc *rowContext) (string, bool) {
	if rc.effective == fleet.PIDAlive {
		rc.noteProcess()
		return "pid " + strconv.FormatInt(rc.row.PID, 10) + " is still running: " + rc.effectiveWhy, true
	}
	return "", false
}

// checkPIDNotReused: when the pid number is now held by a different process
// incarnation (different start time), the row is preserved: an occupied pid
// is never argued away.
func checkPIDNotReused(rc *rowContext) (string, bool) {
	if rc.effective == fleet.PIDReused {
		rc.noteProcess()
		return "pid " + strconv.FormatInt(rc.row.PID, 10) + " is occupied by another process incarnation: " + rc.effectiveWhy, true
	}
	return "", false
}

// checkHeartbeatExpired: lastHeartbeatAt + TTL must not be after Now. This
// only triggers for a fresh heartbeat whose process a probe showed gone.
func checkHeartbeatExpired(rc *rowContext) (string, bool) {
	if rc.expiryOK && rc.p.in.Now.Before(rc.expiry) {
		return "heartbeat does not expire until " + rc.expiryText, true
	}
	if !rc.expiryOK {
		return "heartbeat expiry could not be computed", true
	}
	return "", false
}

// checkOwnershipStale: the stored ownership state must be exactly "stale";
// anything else means the controller's own classification disagrees or has
// not been written yet.
func checkOwnershipStale(rc *rowContext) (string, bool) {
	if rc.row.OwnershipState != fleet.Stale {
		rc.note(EvidenceOwnershipState, rc.row.OwnershipState)
		return "stored ownership state is " + strconv.Quote(rc.row.OwnershipState) + ", not \"" + fleet.Stale + "\"", true
	}
	return "", false
}

// checkNoSharedIdentity: no other registration may claim the same worker
// identity (name), and no other non-retired registration that may be live
// (live, probed alive, or unprobeable) may share this row's process identity
// (host id + boot id + pid), session id or generation id. Shared evidence
// means we cannot tell which row describes the running process.
func checkNoSharedIdentity(rc *rowContext) (string, bool) {
	p, r := rc.p, rc.row
	if rc.sameName > 1 {
		rc.note(EvidenceConflictingWorkers, strconv.Quote(r.Name))
		return fmt.Sprintf("%d registrations share the worker identity %q", rc.sameName, r.Name), true
	}
	if k, ok := procKeyOf(r); ok {
		if names := p.others(p.procIdx[k], rc); names != "" {
			rc.note(EvidenceConflictingWorkers, names)
			return "process identity (host, boot, pod, pid) is shared with possibly live registration(s) " + names, true
		}
	}
	if r.SessionID != "" {
		if names := p.others(p.sessIdx[r.SessionID], rc); names != "" {
			rc.note(EvidenceConflictingWorkers, names)
			return "session id is shared with possibly live registration(s) " + names, true
		}
	}
	if r.GenerationID != "" {
		if names := p.others(p.genIdx[r.GenerationID], rc); names != "" {
			rc.note(EvidenceConflictingWorkers, names)
			return "generation id is shared with possibly live registration(s) " + names, true
		}
	}
	return "", false
}

// checkNoClientInstanceConflict: no other non-retired registration with the
// same (clientInstanceID, workerNamespace) may be live or unprobeable; if one
// might be, the pair is ambiguous and neither row is touched.
func checkNoClientInstanceConflict(rc *rowContext) (string, bool) {
	if rc.row.ClientInstanceID == "" {
		return "", false
	}
	k := cidKey{rc.row.ClientInstanceID, rc.row.WorkerNamespace}
	if names := rc.p.others(rc.p.cidIdx[k], rc); names != "" {
		rc.note(EvidenceConflictingWorkers, names)
		return "client instance id and worker namespace are also claimed by possibly live registration(s) " + names, true
	}
	return "", false
}

// checkNotProtected: a worker that holds an active task claim is never
// retired, whatever the rest of the evidence says.
func checkNotProtected(rc *rowContext) (string, bool) {
	if rc.owner {
		return "the worker holds an active task claim", true
	}
	return "", false
}

// noteProcess attaches the process identity a probe verdict is about.
func (rc *rowContext) noteProcess() {
	rc.note(EvidencePID, strconv.FormatInt(rc.row.PID, 10))
	rc.note(EvidenceRowStartTime, formatOptInt(rc.row.StartTime))
	if rc.hasProbe && rc.probe.ObservedStartTime != nil {
		rc.note(EvidenceObservedStartTime, formatOptInt(rc.probe.ObservedStartTime))
	}
}

// effectivePIDState turns a raw probe into the verdict the checks use.
//
// A probe only speaks for a pid on the controller's own host with both boot
// ids known; otherwise the verdict is unknown whatever the prober said.
// The start-time comparison is applied on top of the prober's answer:
//   - alive, but the observed start time differs from the registered one:
//     the number was reused;
//   - gone, yet a start time was observed: the number is occupied after all,
//     by the registered process (same start time → alive) or by another one
//     (→ reused). Contradictory evidence always resolves towards keeping
//     the row;
//   - gone for a row of another boot (the boot rule): the pid is free now,
//     but a different boot id only means "not this boot of this machine".
//     When a machine id is cloned onto a second machine, the row's boot may
//     be the other machine's current boot and its process alive there. The
//     free pid is gone only when the row's last heartbeat is strictly
//     before this host's current boot began (Host.BootTime): nothing
//     heartbeating after our boot can have been a process of an earlier
//     boot of this machine. An unknown boot time, an unparsable heartbeat,
//     or a heartbeat at or after the boot time is unknown.
//
// Unrecognised states are unknown. The pid-alive and pid-reused verdicts are
// never affected by the boot rule: an occupied pid is always a block.
func effectivePIDState(row *Row, probe *Probe, host Host) (fleet.PIDState, string) {
	if probe == nil {
		return fleet.PIDUnknown, "no probe result"
	}
	if blank(host.HostID) || row.HostID != host.HostID {
		return fleet.PIDUnknown, "a probe cannot speak for a process on another host"
	}
	if blank(row.BootID) || blank(host.BootID) {
		return fleet.PIDUnknown, "boot identity unknown"
	}
	obs, reg := probe.ObservedStartTime, row.StartTime
	switch probe.State.Normalize() {
	case fleet.PIDAlive:
		if obs != nil && reg != nil && *obs != *reg {
			return fleet.PIDReused, fmt.Sprintf("prober reported alive but start time %d differs from registered %d", *obs, *reg)
		}
		return fleet.PIDAlive, "prober reported the registered process alive"
	case fleet.PIDReused:
		return fleet.PIDReused, "prober reported the pid reused"
	case fleet.PIDGone:
		if obs != nil {
			if reg != nil && *obs == *reg {
				return fleet.PIDAlive, fmt.Sprintf("prober reported gone but observed the registered start time %d", *obs)
			}
			return fleet.PIDReused, fmt.Sprintf("prober reported gone but the pid is held by a process started at %d", *obs)
		}
		if otherBootOf(row, host) {
			return earlierBootVerdict(row, host)
		}
		return fleet.PIDGone, "prober reported the pid free"
	default:
		if probe.Detail != "" {
			return fleet.PIDUnknown, "prober could not tell: " + probe.Detail
		}
		return fleet.PIDUnknown, "prober could not tell"
	}
}

// otherBootOf reports whether the row and the host both name a boot and the
// boots differ.
func otherBootOf(row *Row, host Host) bool {
	return !blank(row.BootID) && !blank(host.BootID) && row.BootID != host.BootID
}

// earlierBootVerdict applies the boot rule to a pid found free for a row of
// another boot (see effectivePIDState): gone only when the row's last
// heartbeat predates the start of this host's current boot.
func earlierBootVerdict(row *Row, host Host) (fleet.PIDState, string) {
	var heartbeat *time.Time
	if hb, ok := parseHeartbeat(row.LastHeartbeatAt); ok {
		heartbeat = &hb
	}
	verdict, outcome := fleet.FreePIDVerdict(row.BootID, host.BootID, host.BootTime, heartbeat)
	boots := fmt.Sprintf("prober reported the pid free, but the registration names boot %s, not the current boot %s", row.BootID, host.BootID)
	bt := formatBootTime(host.BootTime)
	switch outcome {
	case fleet.BootTimeUnknown:
		return verdict, boots + ", and this host's boot time is unknown, so a process of that boot on another machine with the same machine id cannot be ruled out"
	case fleet.HeartbeatUnknown:
		return verdict, boots + ", and its heartbeat cannot be read, so it cannot be shown to predate this boot"
	case fleet.HeartbeatNotBeforeBoot:
		return verdict, boots + ", and its last heartbeat " + heartbeat.Format(time.RFC3339Nano) + " is not before this boot began (" + bt +
			"): its process may still run on another machine with the same machine id"
	case fleet.EndedBeforeBoot:
		return verdict, "prober reported the pid free; boot " + row.BootID + " ended before this boot began at " + bt +
			" (last heartbeat " + heartbeat.Format(time.RFC3339Nano) + ")"
	}
	return fleet.PIDUnknown, boots // SameBoot cannot happen here (otherBootOf); fail closed
}

// formatBootTime renders a boot time for evidence: RFC 3339 in UTC, or ""
// when unknown.
func formatBootTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// parseHeartbeat parses a stored heartbeat. It requires RFC 3339 with an
// explicit zone; fractional seconds are optional. The result is in UTC.
func parseHeartbeat(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// blank reports whether s is empty or only whitespace. The common case — a
// value that starts with a visible ASCII character — is decided without
// scanning.
func blank(s string) bool {
	if s == "" {
		return true
	}
	if c := s[0]; c > ' ' && c < 0x7f {
		return false // starts with a visible ASCII character
	}
	return strings.TrimSpace(s) == ""
}

// normalizeRepository is the comparison form of a repository binding.
func normalizeRepository(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// isCanonicalRepository reports whether s is exactly "owner/name": one
// slash, both parts non-empty, no whitespace or control characters.
func isCanonicalRepository(s string) bool {
	slash := strings.IndexByte(s, '/')
	if slash <= 0 || slash == len(s)-1 || strings.IndexByte(s[slash+1:], '/') >= 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func formatOptInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}
