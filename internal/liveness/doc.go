// Package liveness answers one question about a registered worker process:
// is the exact process that was registered still running on this host?
//
// A registration names a process by four facts: the host it ran on
// (/etc/machine-id), the boot of that host (/proc/sys/kernel/random/boot_id,
// whose start time is the btime line of /proc/stat),
// its pid, and its start time (field 22 of /proc/<pid>/stat, in clock ticks
// since boot). A bare pid is not an identity, because pid numbers are recycled;
// host, boot and start time together pin one incarnation.
//
// The prober is deliberately asymmetric. Its callers may only act (for example,
// retire a registry row) on a Gone answer, so Gone is returned only when it has
// been positively established; every doubt becomes Unknown, and an occupied pid
// number is never reported as Gone, whichever boot or host the target claims.
//
// Decision table of ProcProber.Probe, evaluated top to bottom:
//
//	pid <= 0                                        -> Unknown
//	context already done                            -> Unknown
//	prober host or target host empty                -> Unknown (host binding unproven)
//	target host != prober host                      -> Unknown (wrong host)
//	/proc/<pid>/stat unreadable (not ENOENT)        -> Unknown
//	/proc/<pid>/stat unparsable                     -> Unknown
//	pid free (ENOENT):
//	    host boot unverified or target boot empty   -> Unknown
//	    process visibility not proven (hidepid)     -> Unknown
//	    otherwise (same or earlier boot)            -> Gone
//	pid occupied (any state, zombies included):
//	    boots known and different                   -> Reused
//	    expected start time nil                     -> Unknown
//	    start times differ                          -> Reused
//	    start times equal, same verified boot       -> Alive
//	    start times equal, boot unverified/unknown  -> Unknown
//
// Rationale for the less obvious rows:
//
//   - A free pid on a different boot is Gone: no process survives a reboot, and
//     the number is not in use now. It still requires the host to match,
//     because a pid number only means something inside one host's pid space.
//   - A free pid with an unknown boot (either side) is Unknown. The pid space
//     of this prober is the one read through <root>/proc; the live boot id read
//     from the same tree on every probe is what shows that this tree is a real,
//     mounted procfs of the expected boot rather than an empty directory, in
//     which every pid would look free.
//   - A free pid is Gone only when <Root>/proc is proven to show every
//     process. On a procfs mounted with hidepid=1/2 (noaccess, invisible,
//     ptraceable) or subset=pid, or when the agent lacks the permission to
//     read foreign processes, another user's live process looks exactly
//     like a free pid (ENOENT). Before answering Gone the prober therefore
//     reads <Root>/proc/self/mountinfo, finds the procfs mounted at
//     <Root>/proc and refuses any hidepid other than 0/off and any subset=,
//     and it checks a sentinel: <Root>/proc/1/stat must be readable (pid 1
//     exists in every pid namespace and normally belongs to another user;
//     hidepid=2 makes it ENOENT, hidepid=1 or missing permission EACCES).
//     Anything it cannot read or recognise is Unknown with a detail that
//     says why. Occupied pids are unaffected: seeing a process proves it.
//   - Gone for a target of an earlier boot says only that the number is free
//     now. Whether that boot's process is gone is decided by the caller
//     (internal/retirement): with a machine id cloned onto two machines the
//     "earlier boot" may be another machine, so it is Gone there only when
//     the registration's last heartbeat predates this boot (HostFacts.BootTime).
//   - An occupied pid on a known, different boot is Reused: the registered
//     process cannot have survived the reboot, so whatever holds the number is
//     another incarnation. That is still a block for callers, never Gone.
//   - An occupied pid whose start time differs from the expected one is Reused
//     even when the boot is unknown: on the registered boot the registered
//     process would show exactly the expected start time, and on any other boot
//     it cannot be running at all.
//   - Equal start times prove Alive only on the same, verified boot, because
//     start times are relative to boot and repeat across boots.
//
// The pid number space is shared by processes and threads, and /proc/<n>/stat
// also answers for thread ids that are not listed in /proc. A thread holding
// the number therefore counts as an occupant, which is the safe reading.
package liveness
