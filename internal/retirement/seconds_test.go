package retirement

import (
	"math"
	"testing"
	"time"
)

func TestSecondsDuration(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	const maxTTLSeconds = math.MaxInt64 / int64(time.Second)
	tests := []struct {
		seconds int64
		want    time.Duration
	}{
		{seconds: math.MinInt64, want: time.Duration(math.MinInt64)},
		{seconds: -1, want: -time.Second},
		{seconds: 0, want: 0},
		{seconds: 1, want: time.Second},
		{seconds: 900, want: 15 * time.Minute},
		{seconds: 2592000, want: 30 * 24 * time.Hour}, // the schema's maximum
		{seconds: maxTTLSeconds, want: time.Duration(maxTTLSeconds) * time.Second},
		{seconds: maxTTLSeconds + 1, want: maxDuration},
		{seconds: 300 * 365 * 24 * 3600, want: maxDuration}, // ~300 years: overflowed before
		{seconds: math.MaxInt64, want: maxDuration},
	}
	for _, tc := range tests {
		if got := SecondsDuration(tc.seconds); got != tc.want {
			t.Errorf("SecondsDuration(%d) = %v, want %v", tc.seconds, got, tc.want)
		}
	}
}
