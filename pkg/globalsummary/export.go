package globalsummary

import (
	"slices"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
)

// Source is one model's picker state, read and never changed: the endpoint
// picker's store and prefix index (director.Store(), director.Index()).
type Source struct {
	// Model is the pool's base model.
	Model string
	Store *datastore.Store
	// Index and BlockTokens (the index's block size in tokens) give the digest;
	// without either the model has none.
	Index       *prefixindex.Index
	BlockTokens int
	// Staleness is the age beyond which an endpoint's telemetry is not fresh
	// and the endpoint not ready (0: any sample will do), as the picker's own.
	Staleness time.Duration
	// Errors, when set, counts the requests the picker saw end.
	Errors *ErrorWindow
}

// ExporterOptions describe the member cluster.
type ExporterOptions struct {
	Cluster string
	Region  string
	// MaxDigestBits bounds each model's digest (DefaultMaxDigestBits when 0).
	MaxDigestBits int
}

// Exporter builds the member's summary from its pickers' state.
type Exporter struct {
	opts    ExporterOptions
	sources func() []Source

	mu       sync.Mutex
	sequence uint64
	views    []*datastore.EndpointState
}

// NewExporter returns an exporter over the sources sources returns at each
// build (a picker's index block size may change while it runs).
func NewExporter(opts ExporterOptions, sources func() []Source) *Exporter {
	if opts.MaxDigestBits <= 0 {
		opts.MaxDigestBits = DefaultMaxDigestBits
	}
	return &Exporter{opts: opts, sources: sources}
}

// Summary builds the document as of now.
func (e *Exporter) Summary(now time.Time) *Summary {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sequence++
	s := &Summary{Version: Version, Cluster: e.opts.Cluster, Region: e.opts.Region, GeneratedAt: now, Sequence: e.sequence, Models: []Model{}}
	for _, src := range e.sources() {
		s.Models = append(s.Models, e.model(src, now))
	}
	return s
}

func (e *Exporter) model(src Source, now time.Time) Model {
	m := Model{Model: src.Model}
	e.views = src.Store.Endpoints(e.views[:0])
	m.Endpoints = len(e.views)
	var (
		v                        datastore.View
		adapters                 = map[string]struct{}{}
		decodeSum                float64
		kvKnown, capKnown        int
		freeShareSum, freeTokens float64
		capacityTokens           int64
	)
	for _, st := range e.views {
		st.View(now, src.Staleness, &v)
		if v.Models != nil {
			for _, name := range v.Models.Names {
				if name != src.Model {
					adapters[name] = struct{}{}
				}
			}
		}
		if !v.HasMetrics || v.Stale {
			continue
		}
		m.ReadyEndpoints++
		m.Waiting += v.WaitingEstimate()
		m.Running += v.RunningEstimate()
		m.QueuedPrefillTokens += latency.WorkAhead(v.Queue(), 0)
		rate := v.Speed.PrefillTokensPerSecond
		m.PrefillTokensPerSecond += rate
		m.EndpointPrefillTokensPerSecond = max(m.EndpointPrefillTokensPerSecond, rate)
		decodeSum += v.Speed.DecodeStepSeconds
		if u, ok := v.KVUtilization(); ok {
			kvKnown++
			freeShareSum += 1 - u
			if c := int64(v.Metrics.NumGPUBlocks) * int64(v.Metrics.BlockSizeTokens); c > 0 {
				capKnown++
				capacityTokens += c
				freeTokens += (1 - u) * float64(c)
			}
		}
	}
	if m.ReadyEndpoints > 0 {
		m.DecodeStepSeconds = decodeSum / float64(m.ReadyEndpoints)
	}
	if kvKnown > 0 {
		h := freeShareSum / float64(kvKnown)
		if capKnown == kvKnown {
			h = freeTokens / float64(capacityTokens)
		}
		m.KVHeadroom = &h
		m.KVCapacityTokens = capacityTokens
	}
	for a := range adapters {
		m.Adapters = append(m.Adapters, a)
	}
	slices.Sort(m.Adapters)
	if src.Errors != nil {
		m.ErrorRate, m.Requests = src.Errors.Rate(now)
	}
	if src.Index != nil && src.BlockTokens > 0 {
		m.Digest = digestOf(src.Index, src.BlockTokens, e.opts.MaxDigestBits)
	}
	return m
}

// digestOf puts the index's blocks in a filter sized for them, the most
// likely to stay first when they do not all fit.
func digestOf(ix *prefixindex.Index, blockTokens, maxBits int) *Digest {
	d := NewDigest(blockTokens, ix.Blocks(), maxBits)
	limit := d.Capacity()
	ix.VisitRecent(func(h uint64) bool {
		d.Add(h)
		return d.Blocks < limit
	})
	return d
}
