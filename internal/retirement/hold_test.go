package retirement

import (
	"testing"
	"time"
)

func TestProgressHeldBy(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 123000, time.UTC)
	mine := Hold{Applier: "host-a-x1", RenewedAt: at}
	held := Progress{State: ApplyInProgress, Applier: "host-a-x1", StartedAt: at.Truncate(time.Second), RenewedAt: at}
	if got := held.Hold(); got != mine {
		t.Fatalf("Hold() = %+v, want %+v", got, mine)
	}
	cases := []struct {
		name string
		p    Progress
		want bool
	}{
		{"the hold as written", held, true},
		{"no apply started", Progress{}, false},
		{"finished: the report is written", with(held, func(p *Progress) { p.State = ApplyFinished }), false},
		{"another applier took it over", with(held, func(p *Progress) { p.Applier = "host-b-y2" }), false},
		// A takeover by a new incarnation with the same id writes a new renewedAt.
		{"same applier id, a later renewal", with(held, func(p *Progress) { p.RenewedAt = at.Add(time.Microsecond) }), false},
	}
	for _, c := range cases {
		if got := c.p.HeldBy(mine); got != c.want {
			t.Errorf("%s: HeldBy = %v, want %v", c.name, got, c.want)
		}
	}
}

func with(p Progress, change func(*Progress)) Progress {
	change(&p)
	return p
}
