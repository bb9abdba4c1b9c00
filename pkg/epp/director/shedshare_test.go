package director

import "testing"

// A burst's few sheds leave the share under the 5% that marks a sustained
// overload (admission.Policy.WithShedShare); one request in ten shed for a
// while crosses it, and placements bring it back down.
func TestShedShareTellsASustainedOverloadFromABurst(t *testing.T) {
	var s shedShare
	for range 1000 {
		s.observe(false)
	}
	for range 5 {
		s.observe(true)
	}
	if got := s.load(); got >= 0.05 {
		t.Errorf("5 sheds after 1000 placements: share %.3f, want under 0.05", got)
	}
	for i := range 300 {
		s.observe(i%10 == 0)
	}
	if got := s.load(); got < 0.05 || got > 0.15 {
		t.Errorf("one request in ten shed over 300: share %.3f, want about 0.1", got)
	}
	for range 600 {
		s.observe(false)
	}
	if got := s.load(); got >= 0.01 {
		t.Errorf("600 placements after: share %.3f, want near 0", got)
	}
}
