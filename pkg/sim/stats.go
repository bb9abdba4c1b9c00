package sim

import (
	"slices"
	"sort"
	"time"
)

// Histogram is a cumulative distribution in fixed buckets, like a Prometheus
// histogram: Counts[i] counts observations ≤ Bounds[i] not counted before, and the
// last element counts those above every bound.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h *Histogram) observe(d time.Duration, n uint64) {
	v := d.Seconds()
	h.Counts[sort.SearchFloat64s(h.Bounds, v)] += n
	h.Sum += v * float64(n)
	h.Count += n
}

// copyInto copies h into dst, reusing dst's storage.
func (h *Histogram) copyInto(dst *Histogram) {
	dst.Bounds = h.Bounds
	dst.Counts = append(dst.Counts[:0], h.Counts...)
	dst.Sum, dst.Count = h.Sum, h.Count
}

// Bucket bounds of vLLM's latency histograms, so dashboards and quantile queries
// written for vLLM read the simulator the same way.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// podStats are the cumulative counters of one pod.
type podStats struct {
	prefixQueries, prefixHits      uint64
	preemptions                    uint64
	promptTokens, generationTokens uint64
	finishedStop, finishedLength   uint64
	aborted                        uint64
	loraLoads                      uint64
	steps                          uint64
	ttft, itl, e2e, queue          Histogram
}

func newPodStats() *podStats {
	return &podStats{
		ttft:  newHistogram(ttftBuckets),
		itl:   newHistogram(itlBuckets),
		e2e:   newHistogram(requestLatencyBuckets),
		queue: newHistogram(requestLatencyBuckets),
	}
}

// Snapshot is a pod's observable state: what a vLLM server reports on /metrics,
// plus a few figures only a simulator knows. The /metrics handler renders it.
type Snapshot struct {
	// Time is the engine time the snapshot was taken at.
	Time    time.Duration
	Running int
	Waiting int
	// KVCacheUsage is the fraction of KV blocks held by requests (cached blocks
	// nobody holds count as free, as in vLLM).
	KVCacheUsage float64
	BlockSize    int
	NumBlocks    int
	// MaxLoras is the number of adapter slots; 0 means LoRA is disabled.
	MaxLoras int
	// RunningAdapters and WaitingAdapters are the adapters of running and waiting
	// requests; ResidentAdapters are those loaded in GPU slots. Sorted.
	RunningAdapters  []string
	WaitingAdapters  []string
	ResidentAdapters []string
	// Prefix-cache queries and hits count prompt tokens, as vLLM's counters do.
	PrefixCacheQueries uint64
	PrefixCacheHits    uint64
	Preemptions        uint64
	PromptTokens       uint64
	GenerationTokens   uint64
	FinishedStop       uint64
	FinishedLength     uint64
	Aborted            uint64
	LoRALoads          uint64
	Steps              uint64
	// WaitingPrefillTokens is the prompt tokens of waiting requests not yet
	// computed (before prefix-cache hits): the prefill backlog.
	WaitingPrefillTokens int64
	TTFT                 Histogram
	ITL                  Histogram
	E2E                  Histogram
	QueueTime            Histogram
}

func sortedInto(dst []string, names []string, counts []int32) []string {
	dst = dst[:0]
	for i, c := range counts {
		if c > 0 {
			dst = append(dst, names[i])
		}
	}
	slices.Sort(dst)
	return dst
}
