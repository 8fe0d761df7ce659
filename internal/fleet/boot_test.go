package fleet

import (
	"testing"
	"time"
)

func TestFreePIDVerdict(t *testing.T) {
	boot := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	before, after := boot.Add(-time.Minute), boot.Add(time.Minute)
	tests := []struct {
		name      string
		reg, host string
		bootTime  time.Time
		heartbeat *time.Time
		want      PIDState
		outcome   BootOutcome
	}{
		{"same boot", "b1", "b1", boot, &after, PIDGone, SameBoot},
		{"registration names no boot", "", "b1", boot, &after, PIDGone, SameBoot},
		{"host boot unknown", "b0", "", boot, &after, PIDGone, SameBoot},
		{"earlier boot, heartbeat before this boot", "b0", "b1", boot, &before, PIDGone, EndedBeforeBoot},
		{"other boot, heartbeat at this boot's start", "b0", "b1", boot, &boot, PIDUnknown, HeartbeatNotBeforeBoot},
		{"other boot, heartbeat after this boot began", "b0", "b1", boot, &after, PIDUnknown, HeartbeatNotBeforeBoot},
		{"other boot, boot time unknown", "b0", "b1", time.Time{}, &before, PIDUnknown, BootTimeUnknown},
		{"other boot, heartbeat unknown", "b0", "b1", boot, nil, PIDUnknown, HeartbeatUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, outcome := FreePIDVerdict(tt.reg, tt.host, tt.bootTime, tt.heartbeat)
			if got != tt.want || outcome != tt.outcome {
				t.Fatalf("FreePIDVerdict = %s, %d; want %s, %d", got, outcome, tt.want, tt.outcome)
			}
		})
	}
}
