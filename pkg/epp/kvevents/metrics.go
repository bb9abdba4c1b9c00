package kvevents

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/pkg/wire"
)

// Score sources counted by CountScores.
const (
	ScoreExact                = "exact"
	ScoreApproximateStream    = "approximate-stream"
	ScoreApproximateTokenizer = "approximate-tokenizer"
)

// scoreCounts are the scorer's per-source totals.
type scoreCounts struct {
	exact, stream, tokenizer atomic.Uint64
}

// CountScores adds n endpoint scores from source (one of the Score* names).
func (h *Hub) CountScores(source string, n int) {
	switch source {
	case ScoreExact:
		h.scores.exact.Add(uint64(n))
	case ScoreApproximateStream:
		h.scores.stream.Add(uint64(n))
	case ScoreApproximateTokenizer:
		h.scores.tokenizer.Add(uint64(n))
	}
}

var (
	descState    = prometheus.NewDesc(wire.EPPKVEventsStreamState, "1 for the state of each pod's KV event stream; only exact pods are scored from the events.", []string{"endpoint", "state"}, nil)
	descBatches  = prometheus.NewDesc(wire.EPPKVEventsBatches, "KV event batches applied.", []string{"endpoint"}, nil)
	descBlocks   = prometheus.NewDesc(wire.EPPKVEventsBlocks, "Block events applied, by kind (orphan: stored blocks whose parent was never seen).", []string{"endpoint", "kind"}, nil)
	descGaps     = prometheus.NewDesc(wire.EPPKVEventsGaps, "Sequence gaps: seen, recovered by a replay, or lost (history dropped; the pod resyncs).", []string{"endpoint", "outcome"}, nil)
	descReplays  = prometheus.NewDesc(wire.EPPKVEventsReplays, "Replay requests sent (probes of silent pods included) and unanswered.", []string{"endpoint", "result"}, nil)
	descDecode   = prometheus.NewDesc(wire.EPPKVEventsDecodeErrors, "KV event batches that could not be decoded or used.", []string{"endpoint"}, nil)
	descRestarts = prometheus.NewDesc(wire.EPPKVEventsPublisherRestarts, "Publisher restarts seen (the sequence began again).", []string{"endpoint"}, nil)
	descDisconn  = prometheus.NewDesc(wire.EPPKVEventsDisconnects, "Event stream connections lost.", []string{"endpoint"}, nil)
	descIndex    = prometheus.NewDesc(wire.EPPKVEventsIndexBlocks, "Distinct KV blocks in the exact index.", nil, nil)
	descScores   = prometheus.NewDesc(wire.EPPKVEventsScores, "Endpoint prefix scores of the precise scorer, by source.", []string{"source"}, nil)
)

// Collector exposes the hub's streams as Prometheus metrics, read when scraped.
func (h *Hub) Collector() prometheus.Collector { return hubCollector{h} }

type hubCollector struct{ h *Hub }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descBatches, descBlocks, descGaps, descReplays, descDecode, descRestarts, descDisconn, descIndex, descScores} {
		ch <- d
	}
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, s := range c.h.Status() {
		for _, st := range States {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, s.Pod, string(st))
		}
		counter(descBatches, s.Batches, s.Pod)
		counter(descBlocks, s.Stored, s.Pod, "stored")
		counter(descBlocks, s.Removed, s.Pod, "removed")
		counter(descBlocks, s.Orphans, s.Pod, "orphan")
		counter(descBlocks, s.Cleared, s.Pod, "cleared")
		counter(descGaps, s.Gaps, s.Pod, "seen")
		counter(descGaps, s.GapsRecovered, s.Pod, "recovered")
		counter(descGaps, s.GapsLost, s.Pod, "lost")
		counter(descReplays, s.Replays, s.Pod, "sent")
		counter(descReplays, s.ReplayTimeouts, s.Pod, "timeout")
		counter(descDecode, s.DecodeErrors, s.Pod)
		counter(descRestarts, s.Restarts, s.Pod)
		counter(descDisconn, s.Disconnects, s.Pod)
	}
	ch <- prometheus.MustNewConstMetric(descIndex, prometheus.GaugeValue, float64(c.h.Index().Blocks()))
	counter(descScores, c.h.scores.exact.Load(), ScoreExact)
	counter(descScores, c.h.scores.stream.Load(), ScoreApproximateStream)
	counter(descScores, c.h.scores.tokenizer.Load(), ScoreApproximateTokenizer)
}
