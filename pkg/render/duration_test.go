package render

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// gatewayDurationPattern is the schema's pattern of a Gateway API duration (GEP-2257).
var gatewayDurationPattern = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

func TestGatewayDuration(t *testing.T) {
	for _, tc := range []struct {
		in      time.Duration
		want    string
		wantErr string
	}{
		{in: 0, want: "0s"},
		{in: time.Millisecond, want: "1ms"},
		{in: 999 * time.Millisecond, want: "999ms"},
		{in: 1500 * time.Millisecond, want: "1s500ms"},
		{in: time.Second, want: "1s"},
		{in: 300 * time.Second, want: "5m"},
		{in: 90 * time.Minute, want: "1h30m"},
		{in: 24 * time.Hour, want: "24h"},
		{in: time.Hour + time.Millisecond, want: "1h1ms"},
		{in: 25*time.Hour + 61*time.Second + 7*time.Millisecond, want: "25h1m1s7ms"},
		{in: 99999*time.Hour + 59*time.Minute + 59*time.Second + 999*time.Millisecond, want: "99999h59m59s999ms"},
		{in: 100000 * time.Hour, wantErr: "exceeds"},
		{in: 1500 * time.Microsecond, wantErr: "below a millisecond"},
		{in: time.Nanosecond, wantErr: "below a millisecond"},
		{in: -time.Second, wantErr: "negative"},
	} {
		got, err := GatewayDuration(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("GatewayDuration(%s) = %q, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("GatewayDuration(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if !gatewayDurationPattern.MatchString(string(got)) {
			t.Errorf("GatewayDuration(%s) = %q does not match the Gateway API's pattern", tc.in, got)
		}
		if back, err := time.ParseDuration(string(got)); err != nil || back != tc.in {
			t.Errorf("GatewayDuration(%s) = %q reads back as %s, %v", tc.in, got, back, err)
		}
	}
}

// FuzzGatewayDuration checks that whatever the formatter writes matches the
// schema's pattern and reads back as the same duration.
func FuzzGatewayDuration(f *testing.F) {
	for _, seed := range []int64{0, 1, int64(time.Millisecond), int64(1500 * time.Millisecond), int64(100000 * time.Hour), -1} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		got, err := GatewayDuration(d)
		if err != nil {
			return
		}
		if !gatewayDurationPattern.MatchString(string(got)) {
			t.Fatalf("GatewayDuration(%d) = %q does not match the pattern", n, got)
		}
		if back, err := time.ParseDuration(string(got)); err != nil || back != d {
			t.Fatalf("GatewayDuration(%d) = %q reads back as %s, %v", n, got, back, err)
		}
	})
}
