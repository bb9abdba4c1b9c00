package frontdoor

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTrustedCIDRsAreValidated(t *testing.T) {
	got, err := parseTrusted([]string{"10.0.0.0/8", "192.168.1.7", "::1", "10.1.2.3/16"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[10.0.0.0/8 192.168.1.7/32 ::1/128 10.1.0.0/16]" {
		t.Errorf("parsed %v", got)
	}
	if _, err := parseTrusted([]string{"10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), "--trusted-cidrs") {
		t.Errorf("a bad CIDR: %v", err)
	}
}

// The soft memory limit is the body budget plus headroom, unless GOMEMLIMIT
// names one.
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	o := Defaults()
	o.MaxBufferedBytes = 64 << 20
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	o.SetMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != o.MaxBufferedBytes+MemoryHeadroom {
		t.Errorf("limit %d, want the budget plus headroom, %d", got, o.MaxBufferedBytes+MemoryHeadroom)
	}
	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "3GiB")
	o.SetMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the limit became %d, want it left at %d", got, before)
	}
}
