package tokencount

import (
	"strings"
	"testing"
)

// Every CharsPerToken bytes are a token, and a partial last one counts whole.
func TestEstimateCountsAPartialTokenWhole(t *testing.T) {
	for n := range 4*CharsPerToken + 1 {
		want := n / CharsPerToken
		if n%CharsPerToken != 0 {
			want++
		}
		if got := Estimate(strings.Repeat("x", n)); got != want {
			t.Errorf("Estimate of %d bytes = %d, want %d", n, got, want)
		}
	}
}
