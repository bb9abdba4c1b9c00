package director

import "sync"

// shedShareWindow is about how many of the latest decisions the shed share
// is taken over.
const shedShareWindow = 200

// shedShare is the share of the latest requests decided that were shed, an
// exponential mean over about shedShareWindow decisions: what tells a
// sustained overload from a burst (admission.Policy.WithShedShare).
// Requests queued or held count once, at their outcome.
type shedShare struct {
	mu    sync.Mutex
	share float64
}

// observe counts one decision's outcome.
func (s *shedShare) observe(shed bool) {
	x := 0.0
	if shed {
		x = 1
	}
	s.mu.Lock()
	s.share += (x - s.share) / shedShareWindow
	s.mu.Unlock()
}

// load returns the share.
func (s *shedShare) load() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.share
}
