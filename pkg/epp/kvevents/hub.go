// Package kvevents gives the endpoint picker the exact KV cache state of its
// model servers, from the events vLLM publishes with --kv-events-config: a
// ZMQ subscriber per pod decodes the batches, follows their sequence numbers
// (recovering gaps through vLLM's replay socket) and applies them to an index
// of which pod holds which block. A pod whose stream is down, undecodable,
// gapped beyond the replay buffer or silent is marked so, and the picker
// falls back to its approximate index for that pod alone.
//
// The same index takes events in process (Feed), which is how the
// discrete-event benchmark delivers its simulated engines' events, with a
// delay.
package kvevents

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint is a model server the hub should follow: its key ("ip:port", as
// the picker names endpoints) and the host its events are published on.
type Endpoint struct {
	Key  string
	Host string
}

// EndpointOf splits an "ip:port" key into an Endpoint.
func EndpointOf(key string) Endpoint {
	host, _, err := net.SplitHostPort(key)
	if err != nil {
		host = key
	}
	return Endpoint{Key: key, Host: host}
}

// Hub owns the index and one subscriber per followed pod. Nothing runs until
// Configure (the precise-prefix-cache scorer's parameters) and Sync or Run
// (the pods, discovered as the picker discovers endpoints).
type Hub struct {
	log   *slog.Logger
	index atomic.Pointer[Index]

	mu         sync.Mutex
	cfg        StreamConfig
	configured bool
	ctx        context.Context
	stop       context.CancelFunc
	subs       map[string]*subscriber
	streams    map[string]*stream
	want       []Endpoint
	inProcess  map[string]bool

	scores scoreCounts
}

// NewHub returns an idle hub; log may be nil.
func NewHub(log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{log: log, subs: map[string]*subscriber{}, streams: map[string]*stream{}, inProcess: map[string]bool{}}
	h.index.Store(NewIndex(DefaultBlockSize))
	h.ctx, h.stop = context.WithCancel(context.Background())
	return h
}

// Index is the exact index (replaced when the block size is reconfigured).
func (h *Hub) Index() *Index { return h.index.Load() }

// Configure sets how pods are reached. A change restarts every subscription
// (a new block size also empties the index).
func (h *Hub) Configure(cfg StreamConfig) {
	cfg = cfg.WithDefaults()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.configured && cfg == h.cfg {
		return
	}
	h.stopAllLocked()
	if cfg.BlockSize != h.Index().BlockSize() {
		h.index.Store(NewIndex(cfg.BlockSize))
	}
	h.cfg, h.configured = cfg, true
	h.syncLocked()
}

// Disable stops following pods (no scorer needs the events any more); a
// later Configure resumes.
func (h *Hub) Disable() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopAllLocked()
	h.configured = false
}

// Configured reports whether a scorer configured the hub.
func (h *Hub) Configured() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.configured
}

// Sync makes the followed pods exactly eps: new ones are subscribed, gone
// ones unsubscribed and forgotten.
func (h *Hub) Sync(eps []Endpoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.want = slices.Clone(eps)
	h.syncLocked()
}

func (h *Hub) syncLocked() {
	if !h.configured || h.ctx.Err() != nil {
		return
	}
	keep := map[string]bool{}
	for _, ep := range h.want {
		keep[ep.Key] = true
		if h.subs[ep.Key] != nil || h.inProcess[ep.Key] {
			continue
		}
		st := newStream(ep.Key, h.Index(), h.cfg, time.Now())
		h.streams[ep.Key] = st
		h.subs[ep.Key] = startSubscriber(h.ctx, ep.Host, st, h.cfg, h.log)
		h.log.Info("following KV events", "endpoint", ep.Key, "events", endpoint(ep.Host, h.cfg.EventsPort))
	}
	for key, sub := range h.subs {
		if !keep[key] {
			sub.stop()
			delete(h.subs, key)
			delete(h.streams, key)
			h.Index().RemovePod(key)
		}
	}
}

func (h *Hub) stopAllLocked() {
	for key, sub := range h.subs {
		sub.stop()
		delete(h.subs, key)
		delete(h.streams, key)
		h.Index().RemovePod(key)
	}
}

// Run follows the endpoints list returns, every interval, until ctx ends;
// then every subscription stops.
func (h *Hub) Run(ctx context.Context, list func() []Endpoint, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		h.Sync(list())
		select {
		case <-ctx.Done():
			h.Close()
			return
		case <-t.C:
		}
	}
}

// Close stops every subscription; the hub follows nothing afterwards.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stop()
	h.stopAllLocked()
}

// Status lists every followed pod's stream, sorted by pod.
func (h *Hub) Status() []PodStatus {
	h.mu.Lock()
	streams := make([]*stream, 0, len(h.streams))
	for _, st := range h.streams {
		streams = append(streams, st)
	}
	h.mu.Unlock()
	out := make([]PodStatus, 0, len(streams))
	for _, st := range streams {
		out = append(out, st.status())
	}
	slices.SortFunc(out, func(a, b PodStatus) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// Detail is the /readyz detail: a summary line and one line per pod. Events
// never make the picker unready: a pod without them is scored from the
// approximate index.
func (h *Hub) Detail() map[string]any {
	st := h.Status()
	counts := map[State]int{}
	pods := map[string]string{}
	var approx []string
	for _, s := range st {
		counts[s.State]++
		line := fmt.Sprintf("%s since %s: %s (next sequence %d, %d blocks)", s.State, s.Since.UTC().Format(time.RFC3339), s.Reason, s.Next, s.Blocks)
		pods[s.Pod] = line
		if s.State != StateExact {
			approx = append(approx, s.Pod)
		}
	}
	summary := fmt.Sprintf("%d of %d pods exact", counts[StateExact], len(st))
	if len(approx) > 0 {
		summary += "; approximate prefix index for " + strings.Join(approx, ", ")
	}
	return map[string]any{"summary": summary, "pods": pods}
}

// resyncWindow is how long a pod that lost history is scored approximately.
func (h *Hub) resyncWindow() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.WithDefaults().ResyncWindow
}
