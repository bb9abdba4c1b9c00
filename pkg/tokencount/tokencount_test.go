package tokencount

import (
	"strings"
	"testing"
)

func TestEstimateCountsAPartialTokenWhole(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {strings.Repeat("x", 4*CharsPerToken), 4},
	} {
		if got := Estimate(tc.text); got != tc.want {
			t.Errorf("Estimate(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}
