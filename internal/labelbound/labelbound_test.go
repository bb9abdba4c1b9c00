package labelbound

import (
	"fmt"
	"testing"
)

// The first max values are labels; later new ones are Other, while an
// admitted value keeps its own label.
func TestBound(t *testing.T) {
	s := New(3)
	for i := range 3 {
		if v := fmt.Sprint("m", i); s.Label(v) != v {
			t.Fatalf("%s not admitted within the bound", v)
		}
	}
	if got := s.Label("m3"); got != Other {
		t.Errorf("fourth value labelled %q, want %q", got, Other)
	}
	if got := s.Label("m1"); got != "m1" {
		t.Errorf("admitted value labelled %q after the bound", got)
	}
}
