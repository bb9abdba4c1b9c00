package bench

import (
	"math"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/sim"
)

// Metrics are one run's figures (or their medians over seeds), with the
// benchmark contract's JSON keys. Latencies are in seconds; requests that
// arrived during the warmup are left out.
type Metrics struct {
	TTFTP50 float64 `json:"ttft_p50_s"`
	TTFTP95 float64 `json:"ttft_p95_s"`
	TTFTP99 float64 `json:"ttft_p99_s"`
	// TPOT is the time per output token after the first: (finish − first token) / (output − 1).
	TPOTP50 float64 `json:"tpot_p50_s"`
	TPOTP99 float64 `json:"tpot_p99_s"`
	E2EP99  float64 `json:"e2e_p99_s"`
	// OutputTokPerS is the output tokens of counted requests over the
	// measurement window, from the end of the warmup to the last counted finish.
	OutputTokPerS float64 `json:"output_tok_per_s"`
	Completed     float64 `json:"completed"`
	Failed        float64 `json:"failed"`
	// FailedByCode splits Failed by the code each request ended with.
	FailedByCode FailedByCode `json:"failed_by_code"`
	// CutByOutage counts the failed requests whose response broke off after
	// the first byte because their member cluster became unreachable.
	CutByOutage float64 `json:"cut_by_outage,omitempty"`
	// Goodput is the counted requests that met both SLOs per second of the
	// window over which they arrived (from the warmup's end to the last
	// counted arrival): the rate of offered load served within the SLOs. It
	// is not taken over the window to the last finish, as the output rate
	// is, since there one long response finishing late lowered the goodput
	// of a run whose every request met both SLOs.
	Goodput float64 `json:"goodput"`
	// PrefixHitRate is the servers' prefix-cache hits over queries (tokens).
	PrefixHitRate float64 `json:"prefix_hit_rate"`
	LoRALoads     float64 `json:"lora_loads"`
	// MinPodShare is the smallest share of the counted requests routed to
	// any pod without a scheduled fault, in units of an equal share of its
	// fleet (its cluster's counted requests over its cluster's pods): 1 is
	// as many as every other pod, 0 a pod left idle for the whole run.
	MinPodShare float64 `json:"min_pod_share"`
}

// Compute derives a run's metrics from its trace. It also returns the TTFTs
// (seconds, sorted) of the counted completed requests, for plots.
func Compute(t *Trace, sc *scenario.Scenario) (Metrics, []float64) {
	m := Metrics{FailedByCode: FailedByCode{}}
	var ttft, tpot, e2e []float64
	var outTokens, good int
	last, lastArrival := sc.Warmup, sc.Warmup
	for i := range t.Records {
		r := &t.Records[i]
		if !r.Counted {
			continue
		}
		lastArrival = max(lastArrival, r.Arrival)
		if r.Failed || !r.Done {
			m.Failed++
			if r.Cut {
				m.CutByOutage++
			}
			if !r.Done {
				m.FailedByCode.add(CodeClientTimeout) // still waiting when the run ended
			} else {
				m.FailedByCode.add(r.Code)
			}
			continue
		}
		m.Completed++
		ttft = append(ttft, (r.FirstToken - r.Arrival).Seconds())
		e2e = append(e2e, (r.Finish - r.Arrival).Seconds())
		if r.OutputTokens > 1 {
			tpot = append(tpot, perToken(r))
		}
		outTokens += r.OutputTokens
		last = max(last, r.Finish)
		if metSLO(r, sc.SLO) {
			good++
		}
	}
	for _, s := range [][]float64{ttft, tpot, e2e} {
		slices.Sort(s)
	}
	m.TTFTP50, m.TTFTP95, m.TTFTP99 = Percentile(ttft, 50), Percentile(ttft, 95), Percentile(ttft, 99)
	m.TPOTP50, m.TPOTP99 = Percentile(tpot, 50), Percentile(tpot, 99)
	m.E2EP99 = Percentile(e2e, 99)
	if window := (last - sc.Warmup).Seconds(); window > 0 {
		m.OutputTokPerS = float64(outTokens) / window
	}
	if window := (lastArrival - sc.Warmup).Seconds(); window > 0 {
		m.Goodput = float64(good) / window
	}
	if q := t.Fleet.PrefixQueries; q > 0 {
		m.PrefixHitRate = float64(t.Fleet.PrefixHits) / float64(q)
	}
	m.LoRALoads = float64(t.Fleet.LoRALoads)
	m.MinPodShare = minPodShare(t, sc)
	return m, ttft
}

// minPodShare is Metrics.MinPodShare: pods with a fault are left out (a
// router should starve a pod while it fails), but for lost KV events, after
// which the pod serves as well as before; so is a cluster no counted
// request reached.
func minPodShare(t *Trace, sc *scenario.Scenario) float64 {
	cluster := sc.ClusterOfPod()
	faults := sc.PodFaults()
	routed := make([]int, len(cluster))
	var clusterRouted, clusterPods []int
	for _, c := range cluster {
		for len(clusterPods) <= c {
			clusterPods, clusterRouted = append(clusterPods, 0), append(clusterRouted, 0)
		}
		clusterPods[c]++
	}
	for i := range t.Records {
		if r := &t.Records[i]; r.Counted && r.Pod >= 0 && r.Pod < len(routed) {
			routed[r.Pod]++
			clusterRouted[cluster[r.Pod]]++
		}
	}
	least := math.Inf(1)
	for pod, c := range cluster {
		if servingFault(faults[pod]) || clusterRouted[c] == 0 {
			continue
		}
		least = math.Min(least, float64(routed[pod])*float64(clusterPods[c])/float64(clusterRouted[c]))
	}
	if math.IsInf(least, 1) {
		return 0
	}
	return least
}

// servingFault reports whether fs holds a fault that affects how the pod
// serves or reports (every kind but lost KV events).
func servingFault(fs sim.Faults) bool {
	for _, f := range fs {
		if f.Kind != sim.FaultEventsLost {
			return true
		}
	}
	return false
}

// perToken is a completed request's time per output token after the
// first (0 for a single token).
func perToken(r *Record) float64 {
	if r.OutputTokens <= 1 {
		return 0
	}
	return (r.Finish - r.FirstToken).Seconds() / float64(r.OutputTokens-1)
}

// metSLO reports whether completed request r met both of slo's bounds.
func metSLO(r *Record, slo scenario.SLO) bool {
	return within((r.FirstToken-r.Arrival).Seconds(), slo.TTFT) && within(perToken(r), slo.TPOT)
}

// Missed counts the counted requests of t that failed or missed either of
// sc's SLOs: those goodput leaves out.
func Missed(t *Trace, sc *scenario.Scenario) int {
	n := 0
	for i := range t.Records {
		r := &t.Records[i]
		if r.Counted && (r.Failed || !r.Done || !metSLO(r, sc.SLO)) {
			n++
		}
	}
	return n
}

func within(seconds float64, limit time.Duration) bool {
	return limit <= 0 || seconds <= limit.Seconds()
}

// Percentile is the nearest-rank p-th percentile of sorted (0 when empty): the
// smallest value with at least p% of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Median is the median of xs (the mean of the middle two for an even count).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianMetrics takes the median of every field over runs.
func MedianMetrics(runs []Metrics) Metrics {
	var out Metrics
	xs := make([]float64, len(runs))
	for _, c := range Columns {
		for i := range runs {
			xs[i] = c.Value(&runs[i])
		}
		*c.Field(&out) = Median(xs)
	}
	out.FailedByCode = medianFailedByCode(runs)
	return out
}
