package des

import (
	"errors"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/workload"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/sim"
)

// ClientTimeout is how long a client waits for a request's first token
// before it gives up (bench.CodeClientTimeout): long enough that no healthy
// scenario reaches it, so only hung pods and unbounded queues do.
const ClientTimeout = 60 * time.Second

// maxRetries bounds the retries of a request that failed before its first
// byte, for routers that retry (policies.Retrier).
const maxRetries = 2

// deadline is when a routed request's client gives up unless its first token
// came; deadlines are queued in arrival order, which is their order.
type deadline struct {
	at time.Duration
	id uint64
}

// nextDeadline is the earliest pending client timeout, dropping those of
// requests that got their first token or ended.
func (r *run) nextDeadline() (time.Duration, bool) {
	for len(r.deadlines) > 0 {
		d := r.deadlines[0]
		if f := r.flying[d.id]; f != nil && !f.started {
			return d.at, true
		}
		r.deadlines = r.deadlines[1:]
	}
	return 0, false
}

// timeOut fails the request at the head of the deadline queue: the client
// closes the connection, so the pod aborts it.
func (r *run) timeOut(at time.Duration) {
	d := r.deadlines[0]
	r.deadlines = r.deadlines[1:]
	f := r.flying[d.id]
	r.pods[f.pod].Abort(d.id, at)
	r.router.ObserveFailure(f.ticket, director.Failure{}, epoch.Add(at))
	r.fail(f, at, bench.CodeClientTimeout)
}

// fail ends a routed request that got no answer.
func (r *run) fail(f *flight, at time.Duration, code int) {
	delete(r.flying, f.req.ID)
	r.rec.Failed(f.req.ID, at, code)
	r.gen.Finished(f.req, at, false)
}

// submit sends req to pod; a pod that refuses it (down, or failing fast)
// ends the ticket with that failure, and a retrying router tries another pod.
// It returns where the request runs, or the code the client gets.
func (r *run) submit(req *workload.Request, pod int, ticket policies.Ticket, at time.Duration) (int, policies.Ticket, int) {
	now := epoch.Add(at)
	retrier, retries := r.router.(policies.Retrier)
	for attempt := 0; ; attempt++ {
		err := r.pods[pod].Submit(sim.Request{ID: req.ID, Adapter: req.Adapter, Prompt: req.Tokens, OutputTokens: req.OutputTokens}, at)
		if err == nil {
			return pod, ticket, 0
		}
		f, code := failureOf(err)
		if !retries || attempt >= maxRetries || code < 500 {
			r.router.ObserveFailure(ticket, f, now)
			return -1, nil, code
		}
		var ok bool
		if pod, ticket, ok = retrier.Retry(ticket, f, now); !ok {
			return -1, nil, code
		}
	}
}

// failureOf is how a pod's refusal looks to the picker and to the client.
func failureOf(err error) (director.Failure, int) {
	switch {
	case errors.Is(err, sim.ErrRefused):
		return director.Failure{}, bench.CodeNoResponse
	case errors.Is(err, sim.ErrFailFast):
		return director.Failure{Status: http.StatusInternalServerError}, http.StatusInternalServerError
	}
	return director.Failure{Status: http.StatusBadRequest}, http.StatusBadRequest
}

// routeCode is the status of a router's refusal (a 429 shed, a 503 with no
// endpoint, ...).
func routeCode(err error) int {
	var api *apierror.Error
	if errors.As(err, &api) && api.Status > 0 {
		return api.Status
	}
	return http.StatusServiceUnavailable
}

// abandonStuck fails, as client timeouts ClientTimeout after last, the
// requests left on pods that will never progress again (hung for good); false
// if there are none.
func (r *run) abandonStuck(last time.Duration) bool {
	stuck := false
	for _, f := range r.flying {
		if next, busy := r.pods[f.pod].NextEventTime(); busy && next == math.MaxInt64 {
			stuck = true
		}
	}
	if !stuck {
		return false
	}
	at := last + ClientTimeout
	for _, id := range slices.Sorted(maps.Keys(r.flying)) {
		f := r.flying[id]
		r.pods[f.pod].Abort(id, at)
		r.router.ObserveFailure(f.ticket, director.Failure{}, epoch.Add(at))
		r.fail(f, at, bench.CodeClientTimeout)
	}
	return true
}
