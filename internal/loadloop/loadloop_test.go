package loadloop

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestWorkersSendInTurnUntilStop(t *testing.T) {
	const workers = 3
	var (
		mu      sync.Mutex
		next    = map[int]int{} // each worker's next request number
		started sync.WaitGroup
		stopped atomic.Bool
	)
	started.Add(workers)
	l := Start(workers, func(w, i int) {
		if stopped.Load() {
			t.Errorf("worker %d sent request %d after Stop returned", w, i)
		}
		mu.Lock()
		defer mu.Unlock()
		if i != next[w] {
			t.Errorf("worker %d sent request %d, want %d", w, i, next[w])
		}
		if i == 0 {
			started.Done()
		}
		next[w] = i + 1
	})
	started.Wait()
	l.Stop()
	stopped.Store(true)
	if len(next) != workers {
		t.Errorf("%d workers sent requests, want %d", len(next), workers)
	}
}
