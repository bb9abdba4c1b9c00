package latency_test

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

// The spread is the second slowest of the latest 100 streams (of one, that
// one): one slow stream in a hundred is the percentile's tail, not its
// value, two are; and a slow stream counts no more once 100 newer finished.
func TestStreamSpreadsIsTheSecondSlowestOfTheLatestHundred(t *testing.T) {
	var s latency.StreamSpreads
	if got, n := s.Spread(); got != 0 || n != 0 {
		t.Fatalf("empty: spread %v of %d, want none", got, n)
	}
	s.Add(1.5)
	if got, n := s.Spread(); got != 1.5 || n != 1 {
		t.Fatalf("one stream at 1.5: spread %v of %d, want 1.5 of 1", got, n)
	}
	s.Add(3)
	for range 98 {
		s.Add(1)
	}
	if got, n := s.Spread(); got != 1.5 || n != 100 {
		t.Fatalf("streams at 1.5 and 3 among 98 at 1: spread %v of %d, want 1.5 of 100", got, n)
	}
	s.Add(1) // the stream at 1.5 leaves the window
	if got, _ := s.Spread(); got != 1 {
		t.Fatalf("the 1.5 out of the window, 3 the only slow stream: spread %v, want 1", got)
	}
	s.Add(1) // so does the stream at 3
	s.Add(2)
	if got, n := s.Spread(); got != 1 || n != 103 {
		t.Fatalf("one stream at 2 among the latest 100: spread %v of %d, want 1 of 103", got, n)
	}
}
