package frontdoor

import (
	"fmt"
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
