package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/igw-dev/igw/pkg/bench/workload"
)

// Record is one request's life as a backend observed it, in run time (since
// the start of the run).
type Record struct {
	ID         uint64
	Arrival    time.Duration
	FirstToken time.Duration // 0 until the first token
	Finish     time.Duration // 0 until it finished or failed
	// OutputTokens is what the server generated; PromptTokens the prompt's
	// length and CachedTokens its prefix-cache hit on the server.
	OutputTokens int
	PromptTokens int
	CachedTokens int
	// Counted is false for warmup requests.
	Counted bool
	// Done is set when the request finished or failed.
	Done   bool
	Failed bool
	// Code is what a failed request ended with: the HTTP status the client
	// received, or CodeNoResponse or CodeClientTimeout.
	Code int
	// Pod is the index of the pod that served it (-1: none).
	Pod int
	// Adapter is the LoRA adapter it named ("" for the base model).
	Adapter string
	// Cut marks a failure after the first byte because the member cluster
	// serving it became unreachable (a scheduled outage): no router can
	// avoid it, so the SLO verdict does not hold it against the policy.
	Cut bool
	// Origin is the client region (multi-cluster scenarios).
	Origin string
	// Sends are the member clusters a multi-cluster request was sent to, in
	// order (a retry after a failure before the first byte adds one).
	Sends []Send
}

// Send is one attempt of a multi-cluster request: when the hub sent it, and
// the index of the cluster (in the scenario's clusters) it went to.
type Send struct {
	At      time.Duration
	Cluster int
}

// FleetCounters are the model servers' own counters over the measurement
// window (from the end of the warmup until the last request ended).
type FleetCounters struct {
	// PrefixQueries and PrefixHits count prompt tokens looked up in and found in
	// the servers' prefix caches (vllm:prefix_cache_queries/hits).
	PrefixQueries uint64
	PrefixHits    uint64
	// LoRALoads counts adapters loaded into GPU slots.
	LoRALoads uint64
}

// Trace is everything a run observed.
type Trace struct {
	Records []Record
	Fleet   FleetCounters
}

// Recorder collects a Trace. Backends call it as things happen; it is not safe
// for concurrent use.
type Recorder struct {
	byID  map[uint64]int
	trace Trace
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{byID: map[uint64]int{}} }

// Arrived records a request the client sent at req.Arrival.
func (r *Recorder) Arrived(req *workload.Request) {
	r.byID[req.ID] = len(r.trace.Records)
	r.trace.Records = append(r.trace.Records, Record{ID: req.ID, Arrival: req.Arrival, Counted: req.Counted, Pod: -1, Adapter: req.Adapter,
		Origin: req.Origin})
}

// Routed records the pod a request went to.
func (r *Recorder) Routed(id uint64, pod int) {
	if i, ok := r.byID[id]; ok {
		r.trace.Records[i].Pod = pod
	}
}

// FirstToken records a request's first output token.
func (r *Recorder) FirstToken(id uint64, at time.Duration) {
	if i, ok := r.byID[id]; ok {
		r.trace.Records[i].FirstToken = at
	}
}

// Finished records a completed request: the tokens it produced, its prompt
// length and how much of the prompt the server had cached.
func (r *Recorder) Finished(id uint64, at time.Duration, outputTokens, promptTokens, cachedTokens int) {
	if i, ok := r.byID[id]; ok {
		rec := &r.trace.Records[i]
		rec.Finish, rec.OutputTokens, rec.Done = at, outputTokens, true
		rec.PromptTokens, rec.CachedTokens = promptTokens, cachedTokens
		delete(r.byID, id)
	}
}

// Failed records a request that got no answer (rejected or broken) and the
// code it ended with (see Record.Code).
func (r *Recorder) Failed(id uint64, at time.Duration, code int) {
	if i, ok := r.byID[id]; ok {
		rec := &r.trace.Records[i]
		rec.Finish, rec.Failed, rec.Done, rec.Code = at, true, true, code
		delete(r.byID, id)
	}
}

// Cut records a request whose response broke off after its first byte
// because its member cluster became unreachable (CodeNoResponse at the client).
func (r *Recorder) Cut(id uint64, at time.Duration) {
	if i, ok := r.byID[id]; ok {
		r.trace.Records[i].Cut = true
	}
	r.Failed(id, at, CodeNoResponse)
}

// Sent records that the hub sent request id to cluster at at.
func (r *Recorder) Sent(id uint64, cluster int, at time.Duration) {
	if i, ok := r.byID[id]; ok {
		r.trace.Records[i].Sends = append(r.trace.Records[i].Sends, Send{At: at, Cluster: cluster})
	}
}

// SetFleet records the servers' counters over the measurement window.
func (r *Recorder) SetFleet(c FleetCounters) { r.trace.Fleet = c }

// InFlight is the number of requests that arrived and did not end yet.
func (r *Recorder) InFlight() int { return len(r.byID) }

// Trace returns what was recorded.
func (r *Recorder) Trace() *Trace { return &r.trace }

// WriteCSV writes the records as CSV (times in seconds), one request a line.
func (t *Trace) WriteCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "id,arrival_s,ttft_s,e2e_s,pod,adapter,prompt_tokens,cached_tokens,output_tokens,counted,failed")
	for i := range t.Records {
		r := &t.Records[i]
		ttft := ""
		if r.FirstToken > 0 {
			ttft = strconv.FormatFloat((r.FirstToken - r.Arrival).Seconds(), 'f', 6, 64)
		}
		fmt.Fprintf(bw, "%d,%.6f,%s,%.6f,%d,%s,%d,%d,%d,%t,%t\n", r.ID, r.Arrival.Seconds(), ttft, (r.Finish - r.Arrival).Seconds(),
			r.Pod, r.Adapter, r.PromptTokens, r.CachedTokens, r.OutputTokens, r.Counted, r.Failed)
	}
	return bw.Flush()
}
