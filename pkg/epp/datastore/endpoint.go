// Package datastore holds the endpoints the picker may route to and everything
// it knows about each: the latest model-server telemetry, its own in-flight
// accounting (every pick counts against the endpoint at once, so stale scrapes
// cannot cause herding) and, fed by that accounting, the timing model's learner
// of the endpoint's speed (pkg/epp/latency).
//
// Nothing here reads a clock: every update carries the time it happened, so the
// same code runs in production and in a discrete-event benchmark's virtual time.
package datastore

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

// Endpoint is one model-server port: an address, a port and the labels of the
// pod (or file entry) it came from.
type Endpoint struct {
	Address string            `json:"address"`
	Port    int               `json:"port"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Key is the endpoint's "ip:port" form, as the proxy receives it.
func (e Endpoint) Key() string { return net.JoinHostPort(e.Address, strconv.Itoa(e.Port)) }

// Metrics is one telemetry sample of a model server, engine-neutral.
type Metrics struct {
	Waiting int // requests queued, not yet running
	Running int // requests in the running batch
	// KVCacheUsage is the fraction of KV-cache blocks in use, 0..1; valid when KVCacheKnown.
	KVCacheUsage float64
	KVCacheKnown bool
	// RunningAdapters and WaitingAdapters name the LoRA adapters with requests
	// running or waiting; MaxAdapters is the number of adapter slots (0: unknown).
	RunningAdapters []string
	WaitingAdapters []string
	MaxAdapters     int
	// BlockSizeTokens and NumGPUBlocks describe the KV cache (0: unknown).
	BlockSizeTokens int
	NumGPUBlocks    int
	// PrefixCacheHitRate is the server's own cumulative hit rate (0..1; -1 unknown).
	PrefixCacheHitRate float64
	// SampledAt is when the sample was taken.
	SampledAt time.Time
}

// HasAdapter reports whether adapter is running or waiting on the server.
func (m *Metrics) HasAdapter(adapter string) (running, waiting bool) {
	for _, a := range m.RunningAdapters {
		if a == adapter {
			running = true
			break
		}
	}
	for _, a := range m.WaitingAdapters {
		if a == adapter {
			waiting = true
			break
		}
	}
	return running, waiting
}

// ServedModels is an endpoint's answer to GET /v1/models: every model name its
// server answers to (base models and registered LoRA adapters), and when it was
// read. It changes only when an adapter is loaded or unloaded, so it is read far
// less often than the metrics; a failed read keeps the previous list, whose age
// ReadAt tells. A value is never modified once stored: views share it.
type ServedModels struct {
	// Names are sorted and distinct.
	Names  []string
	ReadAt time.Time
}

// NewServedModels returns the list of names (in any order, repeats allowed) read at readAt.
func NewServedModels(names []string, readAt time.Time) *ServedModels {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	return &ServedModels{Names: slices.Compact(sorted), ReadAt: readAt}
}

// Serves reports whether the server listed name.
func (m *ServedModels) Serves(name string) bool {
	_, found := slices.BinarySearch(m.Names, name)
	return found
}

// View is a consistent copy of one endpoint's state, taken for one scheduling
// decision. Scorers read only views, so they need no locks.
type View struct {
	ID      int32
	Key     string
	Labels  map[string]string // shared, read-only
	Metrics Metrics           // zero when HasMetrics is false
	// HasMetrics is false until the first sample; Stale is true when the latest
	// sample is older than the store's staleness limit (or missing while a limit is set).
	HasMetrics bool
	Stale      bool

	// Own accounting of requests this picker sent.
	InFlight          int // picked and not finished
	PendingFirstToken int // picked, no first token yet
	// PendingPrefillTokens is the uncached prompt tokens of requests still waiting
	// for their first token; BacklogTokens is the part of it the endpoint has
	// probably not worked through yet (drained at the learned prefill rate).
	PendingPrefillTokens int64
	BacklogTokens        float64
	// PicksSinceSample and FinishedSinceSample correct a stale telemetry sample
	// with what happened after it.
	PicksSinceSample    int
	FirstTokensSince    int
	FinishedSinceSample int
	// MeanPromptTokens is the running mean of uncached tokens per request sent
	// here, used to turn a waiting count into work.
	MeanPromptTokens float64
	// AdaptersSinceSample are adapters sent here after the sample (read-only).
	AdaptersSinceSample []string
	// Models is the endpoint's last read model list (shared, read-only); nil
	// while none was ever read, so what it serves is unknown.
	Models *ServedModels

	Speed latency.Speed
	// Avoid: the endpoint should get no new pick now (ejected after failures,
	// stalled, or at its slow-start cap; health.go). The picker ignores it
	// when every endpoint is to be avoided.
	Avoid bool
	// LastPickAt is when the picker last sent a request here (zero: never).
	LastPickAt time.Time
	// PickRate is the picks per second sent here, an exponentially decaying
	// average over PickRateWindow: compared with the other candidates', the
	// endpoint's share of the picker's traffic.
	PickRate float64
	// PlacedTokens is the uncached prompt tokens sent here, decaying over
	// PlacedWindow, as of LastPickAt (PlacedSeconds decays it to a
	// decision's time; few decisions read it, so the view does not).
	PlacedTokens float64
	// OldestWait is how long the oldest request of the picker's still
	// awaiting its first token here has waited (0: none waits).
	OldestWait time.Duration
	// Overdue is how far the picker's requests still awaiting their first
	// token here are past the first token predicted for them at the pick,
	// the most of any (0: none is): how late the endpoint runs against the
	// predictions, where OldestWait also counts a long prompt's own prefill.
	Overdue time.Duration
	// OverdueInLine is Overdue over the requests the server has not passed
	// over (a request picked after one had its first token first): those
	// that wait in line for the batch, not for an adapter slot or memory.
	OverdueInLine time.Duration
	// ClassStreamSpread and ClassSpreadSamples are the stream spread
	// (latency.Speed.StreamSpread) pooled over the endpoints of its speed
	// class, and the streams behind it (0: no class, or none finished).
	ClassStreamSpread  float64
	ClassSpreadSamples int
	// AdapterSlotWaitSeconds is how long the request being decided would
	// wait here for its LoRA adapter to get a slot (0: resident, a slot is
	// free, or no adapter). Not the endpoint's: the picker sets it for each
	// decision (director), admission control reads it.
	AdapterSlotWaitSeconds float64
}

// PlacedSeconds is PlacedTokens decayed to now, in seconds of the
// endpoint's learned prefill: the content it was given to cache of late,
// for its speed, which draws the later requests that share it.
func (v *View) PlacedSeconds(now time.Time) float64 {
	return decayed(v.PlacedTokens, v.LastPickAt, now, PlacedWindow) / max(v.Speed.PrefillTokensPerSecond, 1)
}

// WaitingEstimate is the queue length corrected for picks since the sample:
// requests sent after it are assumed queued until their first token arrives.
func (v *View) WaitingEstimate() int {
	if !v.HasMetrics {
		return v.PendingFirstToken
	}
	w := v.Metrics.Waiting + v.PicksSinceSample - v.FirstTokensSince
	if w < 0 {
		w = 0
	}
	return max(w, v.PendingFirstToken)
}

// UnaccountedWaiting is the number of waiting requests the telemetry shows
// beyond this picker's own: those other pickers (EPP replicas) or clients
// that bypass the picker sent. It is the sample's waiting count less the
// picker's requests then awaiting their first token (picks and first tokens
// since the sample change both alike), so requests of the picker's that the
// server already runs (a prompt in chunked prefill) make it an underestimate
// rather than a double count. Zero before the first sample.
func (v *View) UnaccountedWaiting() int {
	if !v.HasMetrics {
		return 0
	}
	return max(0, v.Metrics.Waiting+v.PicksSinceSample-v.FirstTokensSince-v.PendingFirstToken)
}

// Queue is what the timing model reads of the endpoint.
func (v *View) Queue() latency.Queue {
	return latency.Queue{BacklogTokens: v.BacklogTokens, OthersWaiting: v.UnaccountedWaiting(),
		MeanPromptTokens: v.MeanPromptTokens, PendingFirstToken: v.PendingFirstToken,
		ArrivingTokensPerSecond: v.PickRate * v.MeanPromptTokens, Speed: &v.Speed}
}

// LoadEstimate is running plus waiting requests corrected the same way: the
// endpoint's total load in requests.
func (v *View) LoadEstimate() int {
	if !v.HasMetrics {
		return v.InFlight
	}
	l := v.Metrics.Waiting + v.Metrics.Running + v.PicksSinceSample - v.FinishedSinceSample
	if l < 0 {
		l = 0
	}
	return max(l, v.InFlight)
}

// RunningEstimate is the running batch corrected for first tokens and
// completions since the sample.
func (v *View) RunningEstimate() int {
	if !v.HasMetrics {
		return v.InFlight - v.PendingFirstToken
	}
	r := v.Metrics.Running + v.FirstTokensSince - v.FinishedSinceSample
	if r < 0 {
		r = 0
	}
	return max(r, v.InFlight-v.PendingFirstToken)
}

// KVUtilization estimates the KV-cache use now (0..1) and whether it is known:
// the sample raised by the prompt tokens sent since it, when the cache size is
// known, so a burst does not pile onto the endpoint that looked emptiest.
func (v *View) KVUtilization() (float64, bool) {
	return kvUtilization(v.Metrics, v.HasMetrics, v.PicksSinceSample, v.MeanPromptTokens, 0)
}

// KVUtilizationWith is KVUtilization with tokens more held in the cache
// (a request joining), counted when the cache size is known.
func (v *View) KVUtilizationWith(tokens float64) (float64, bool) {
	return kvUtilization(v.Metrics, v.HasMetrics, v.PicksSinceSample, v.MeanPromptTokens, tokens)
}

// InterTokenWith predicts the time between tokens of the streams there once
// a request with uncached prompt tokens joins (latency.Model.InterTokenWith),
// with the KV cache holding its prompt, and its output as it grows: half a
// stream's life on average.
func (v *View) InterTokenWith(m latency.Model, uncached int) float64 {
	kv, kvKnown := v.KVUtilizationWith(float64(uncached) + v.Speed.StreamLife()/2)
	return m.InterTokenWith(v.Speed, uncached, kv, kvKnown)
}

// KVOverflow is how much more than the whole KV cache (as a share of it)
// the endpoint would need to hold tokens more: what must be freed before
// they fit. 0 when they fit, or when the cache's use or size is unknown.
func (v *View) KVOverflow(tokens float64) float64 {
	u, _, sized := kvDemand(v.Metrics, v.HasMetrics, v.PicksSinceSample, v.MeanPromptTokens, tokens)
	if !sized {
		return 0
	}
	return max(0, u-1)
}

// kvUtilization is kvDemand within the cache's size, and whether the use is
// known.
func kvUtilization(m Metrics, has bool, picksSince int, meanPrompt, joining float64) (float64, bool) {
	u, known, _ := kvDemand(m, has, picksSince, meanPrompt, joining)
	return min(u, 1), known
}

// kvDemand is the sampled KV-cache use m shows (known: the sample says it),
// raised by picks since the sample of meanPrompt tokens each and by joining
// tokens more when the cache's size is known (sized): a share of the cache,
// over 1 when they would not fit.
func kvDemand(m Metrics, has bool, picksSince int, meanPrompt, joining float64) (u float64, known, sized bool) {
	if !has || !m.KVCacheKnown {
		return 0, false, false
	}
	u = m.KVCacheUsage
	if capacity := m.NumGPUBlocks * m.BlockSizeTokens; capacity > 0 {
		u += (float64(picksSince)*meanPrompt + joining) / float64(capacity)
		sized = true
	}
	return u, true, sized
}
