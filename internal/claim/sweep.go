package claim

import (
	"strings"
	"time"
)

// PublishedRecord is a claim record as found on one target in Gitea.
type PublishedRecord struct {
	// Target is the item whose body holds the record.
	Target Target
	// Record is the record.
	Record Record
}

// OrphanedRecords returns the records still in force at now whose claim no longer exists
// (exists reports whether a claim with that id exists). Nothing can end them but the
// sweep: no claim object is left to clear its record, and until its expiry the record
// makes every other claim of the target fail closed. The claims must have been listed
// after the records, so a claim that published while the sweep ran is not taken for gone.
func OrphanedRecords(records []PublishedRecord, exists func(claimID string) bool, now time.Time) []PublishedRecord {
	var out []PublishedRecord
	for _, p := range records {
		id := strings.TrimSpace(p.Record.ClaimID)
		if id == "" || !p.Record.InForce(now) || exists(id) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Lock is a per-target lock (Lease) as the sweep sees it.
type Lock struct {
	// Holder is the claim id recorded as holder ("" when free).
	Holder string
	// Owners are the uids of the claims named in the Lease's owner references.
	Owners []string
	// IdleSince is when a free lock was last released or created (zero: unknown).
	IdleSince time.Time
}

// LockRemovable reports whether the sweep may delete a lock: no existing claim holds or
// owns it, and either its holder claim is gone (a holder that no longer exists can never
// renew or release it) or it has been free for at least idle. Deleting a lock is safe for
// the lock's history because resourceVersions are never reused: a pin taken at any
// generation of a deleted lock can never match its successor (every pin names a
// generation, since the controller creates the lock before it validates). exists reports
// whether a claim with that id exists; the claims must have been listed after the locks.
func LockRemovable(l Lock, exists func(claimID string) bool, now time.Time, idle time.Duration) bool {
	for _, o := range l.Owners {
		if exists(o) {
			return false
		}
	}
	if h := strings.TrimSpace(l.Holder); h != "" {
		return !exists(h)
	}
	return !l.IdleSince.IsZero() && !now.Before(l.IdleSince.Add(idle))
}
