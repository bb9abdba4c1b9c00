package sim

// requestQueue is the FCFS waiting queue: O(1) at both ends, and removal of a
// request behind a few skipped ones shifts only those.
type requestQueue struct {
	items []*request
	head  int
}

func (q *requestQueue) len() int             { return len(q.items) - q.head }
func (q *requestQueue) at(i int) *request    { return q.items[q.head+i] }
func (q *requestQueue) pushBack(r *request)  { q.compact(); q.items = append(q.items, r) }
func (q *requestQueue) all() []*request      { return q.items[q.head:] }
func (q *requestQueue) reset()               { clear(q.items); q.items, q.head = q.items[:0], 0 }
func (q *requestQueue) setAll(rs []*request) { q.reset(); q.items = append(q.items, rs...) }

func (q *requestQueue) pushFront(r *request) {
	if q.head == 0 {
		q.items = append(q.items, nil)
		copy(q.items[1:], q.items)
		q.items[0] = r
		return
	}
	q.head--
	q.items[q.head] = r
}

// removeAt removes the i-th request by moving the i requests before it back one.
func (q *requestQueue) removeAt(i int) {
	copy(q.items[q.head+1:q.head+i+1], q.items[q.head:q.head+i])
	q.items[q.head] = nil
	q.head++
}

// remove deletes r wherever it is; false if it is not queued.
func (q *requestQueue) remove(r *request) bool {
	for i, x := range q.all() {
		if x == r {
			q.removeAt(i)
			return true
		}
	}
	return false
}

// compact reclaims the consumed front once it is at least half the backing array.
func (q *requestQueue) compact() {
	if q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}
