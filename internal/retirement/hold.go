package retirement

import "time"

// Hold is an applier's hold on an apply: its instance id and the renewedAt it last
// wrote. Nobody else writes renewedAt, so a plan whose progress still shows both is still
// held by it: a takeover, even by an applier of the same id, writes a new renewedAt.
type Hold struct {
	Applier   string
	RenewedAt time.Time
}

// HeldBy says whether the recorded progress still shows hold h, with the apply under way.
func (p Progress) HeldBy(h Hold) bool {
	return p.State == ApplyInProgress && p.Applier == h.Applier && p.RenewedAt.Equal(h.RenewedAt)
}

// Hold is the hold the recorded progress shows: its applier and last renewal.
func (p Progress) Hold() Hold { return Hold{Applier: p.Applier, RenewedAt: p.RenewedAt} }
