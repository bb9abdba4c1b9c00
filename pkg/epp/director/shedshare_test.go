package director

import "testing"

// A burst's few sheds leave the share under the 10% that marks a sustained
// overload (admission.Policy.WithShedShare); one request in five shed for a
// while crosses it, and placements bring it back down.
func TestShedShareTellsASustainedOverloadFromABurst(t *testing.T) {
	var s shedShare
	for range 1000 {
		s.observe(false)
	}
	for range 10 {
		s.observe(true)
	}
	if got := s.load(); got >= 0.1 {
		t.Errorf("10 sheds after 1000 placements: share %.3f, want under 0.1", got)
	}
	for i := range 400 {
		s.observe(i%5 == 0)
	}
	if got := s.load(); got < 0.15 || got > 0.25 {
		t.Errorf("one request in five shed over 400: share %.3f, want about 0.2", got)
	}
	for range 600 {
		s.observe(false)
	}
	if got := s.load(); got >= 0.01 {
		t.Errorf("600 placements after: share %.3f, want near 0", got)
	}
}
