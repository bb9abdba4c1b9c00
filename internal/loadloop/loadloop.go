// Package loadloop is the steady load of the end-to-end tests (test/e2e's
// chaos spec, test/global): workers that each send one request after another
// until the load stops.
package loadloop

import "sync"

// Loop is a running load.
type Loop struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start starts n workers: worker w sends its i-th request with send(w, i),
// one after another, until Stop.
func Start(n int, send func(w, i int)) *Loop {
	l := &Loop{stop: make(chan struct{})}
	for w := range n {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				send(w, i)
			}
		})
	}
	return l
}

// Stop ends the load and waits for the requests in flight.
func (l *Loop) Stop() {
	close(l.stop)
	l.wg.Wait()
}
