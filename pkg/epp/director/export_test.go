package director

// SetAfterQueuedDecision sets the hook run between a request's decision to
// wait and its wait; the returned func restores the previous one.
func SetAfterQueuedDecision(f func()) (restore func()) {
	prev := afterQueuedDecision
	afterQueuedDecision = f
	return func() { afterQueuedDecision = prev }
}
