package clock

import (
	"testing"
	"time"
)

func TestNowPrefersTheGivenClock(t *testing.T) {
	fixed := time.Unix(1_700_000_000, 0)
	if got := Now(func() time.Time { return fixed }); !got.Equal(fixed) {
		t.Fatalf("given clock ignored: %v", got)
	}
	before := time.Now()
	if got := Now(nil); got.Before(before) || got.After(time.Now()) {
		t.Fatalf("nil clock gave %v, not the wall clock", got)
	}
}
