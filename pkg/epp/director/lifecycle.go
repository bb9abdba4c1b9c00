package director

import (
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Lifecycle is the one shape of a pick's life after the pick, shared by igw's
// director (for the ext_proc server and the standalone gateway), the
// standalone gateway's pickers and the benchmark's policies. The response
// path reports to the picker that made a pick, each at the time it happens,
// the pick's first output token, later tokens, and its end: ObserveCompletion
// for a whole response, ObserveFailure for one that failed before or after
// its first byte. Every pick ends with one of the two. P is the picker's
// handle on one pick (the director's *Result).
type Lifecycle[P any] interface {
	// ObserveFirstToken reports the pick's first output token.
	ObserveFirstToken(p P, now time.Time)
	// ObserveTokens reports n more output tokens arriving together.
	ObserveTokens(p P, n int, now time.Time)
	// ObserveCompletion ends a pick whose response arrived whole;
	// outputTokens is the usage the server reported (0 if unknown).
	ObserveCompletion(p P, outputTokens int, now time.Time)
	// ObserveFailure ends a pick whose request failed.
	ObserveFailure(p P, f Failure, now time.Time)
}

// Failure is how a picked request failed.
type Failure struct {
	// Status is the HTTP status the model server answered with: an error
	// status, or a success whose response broke off (a stream cut short, the
	// client gone). 0 when the request failed before the first byte of a
	// response: the connection was refused or reset, it timed out, or the
	// request could not be sent.
	Status int
}

// BeforeFirstByte reports whether the request failed before any response arrived.
func (f Failure) BeforeFirstByte() bool { return f.Status == 0 }

var _ Lifecycle[*Result] = (*Director)(nil)

// ObserveFirstToken reports the first output token of a scheduled request.
func (d *Director) ObserveFirstToken(r *Result, now time.Time) {
	r.Endpoint.ObserveFirstToken(r.Request, now)
	d.queue.wake()
}

// ObserveTokens reports n more output tokens arriving together at now.
func (d *Director) ObserveTokens(r *Result, n int, now time.Time) {
	r.Endpoint.ObserveTokens(r.Request, n, now)
}

// ObserveCompletion ends a scheduled request whose response arrived whole;
// outputTokens is the usage the server reported (0 if unknown). The server
// caches the reply's blocks too, which ages the prefixes it holds; the prefix
// index is charged alike.
func (d *Director) ObserveCompletion(r *Result, outputTokens int, now time.Time) {
	r.Endpoint.ObserveCompletion(r.Request, outputTokens, now)
	d.queue.wake()
	if p := d.pipeline.Load(); p != nil && outputTokens > 0 {
		d.index.Consume(r.Endpoint.ID(), outputTokens/d.blockTokens(p))
	}
}

// ObserveFailure ends a scheduled request that failed: the endpoint's
// accounting ends it without output, nothing is learned from its timing, and
// a server error or a failure without status counts toward ejecting the
// endpoint (datastore/health.go).
func (d *Director) ObserveFailure(r *Result, f Failure, now time.Time) {
	r.Endpoint.ObserveFailure(r.Request, f.Status, now)
	d.queue.wake()
}

// Reroute moves r, which failed with f before any byte of a response reached
// the client, to endpoint (one of its fallbacks): r fails there, and a new pick
// counts against endpoint with the whole prompt uncached (the fallback's
// cache is unknown). It returns the new pick, or nil when the store no
// longer knows endpoint: the request then goes on unaccounted.
func (d *Director) Reroute(r *Result, f Failure, endpoint string, now time.Time) *Result {
	d.ObserveFailure(r, f, now)
	st := d.store.Get(endpoint)
	if st == nil {
		return nil
	}
	old := r.Request
	req := &datastore.Request{PromptTokens: old.PromptTokens, UncachedTokens: old.PromptTokens,
		ChunkTokens: old.ChunkTokens, Adapter: old.Adapter}
	st.Picked(req, now)
	return &Result{Primary: endpoint, Reason: r.Reason, Endpoint: st, Request: req}
}
