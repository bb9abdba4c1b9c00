package director

import "sync"

// ReasonOverBounds counts a request placed over the admission bounds on the
// miss budget, where it would have been shed.
const ReasonOverBounds = "over-bounds"

// missBurst caps the budget saved up: a quiet hour does not pay for a burst
// of requests placed over the bounds at once.
const missBurst = 4

// missBudget is the admission's miss budget as a token bucket that starts
// full: every request decided earns the policy's share of a request, and
// each request placed over the bounds spends one.
type missBudget struct {
	mu sync.Mutex
	// spent is how far the bucket is below full (missBurst).
	spent float64
}

// earn adds share (a request's worth of the budget).
func (b *missBudget) earn(share float64) {
	if share <= 0 {
		return
	}
	b.mu.Lock()
	b.spent = max(b.spent-share, 0)
	b.mu.Unlock()
}

// spend takes one request's worth if the budget holds it.
func (b *missBudget) spend() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent+1 > missBurst {
		return false
	}
	b.spent++
	return true
}
