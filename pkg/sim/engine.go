// Package sim simulates a vLLM model server on a GPU; see README.md for the
// timing model and where its numbers come from.
package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// Engine is one simulated pod. It has no clock of its own: every call says what
// time it is, so the same engine runs under a wall clock (the HTTP server) or a
// simulated one (the discrete-event benchmark). It is not safe for concurrent use.
//
// Time is a time.Duration since an arbitrary origin and never goes backwards.
type Engine struct {
	cfg         Config
	prof        Profile
	kv          *kvCache
	pod         pod
	maxModelLen int

	now            time.Duration
	eventsReturned bool

	byID         map[uint64]*request
	adapterIndex map[string]int32
	adapterNames []string
	pool         []*request

	predictor predictor

	// faults is the pod's fault schedule; crashed counts the crashes of it
	// already applied (they are applied in order of start).
	faults  Faults
	crashes []time.Duration
	crashed int
}

// Errors returned by Submit.
var (
	ErrDuplicateID   = errors.New("sim: request ID already in flight")
	ErrTimeBackwards = errors.New("sim: time went backwards")
	ErrLoRADisabled  = errors.New("sim: request names an adapter but the pod has no adapter slots")
	// ErrRefused: the pod is down (a crash fault); a server refuses the connection.
	ErrRefused = errors.New("sim: connection refused: the pod is down")
	// ErrFailFast: a fail-fast fault; a server answers 500.
	ErrFailFast = errors.New("sim: internal server error (fail-fast fault)")
)

// New builds an engine for cfg; zero fields take their defaults.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prof, err := NewProfile(cfg.GPU, cfg.Model, cfg.TensorParallel)
	if err != nil {
		return nil, err
	}
	kvTokens := cfg.KVCacheTokens
	if kvTokens == 0 {
		kvTokens = prof.KVCapacityTokens
	}
	numBlocks := int32(kvTokens / BlockSize)
	e := &Engine{
		cfg:          cfg,
		prof:         prof,
		kv:           newKVCache(numBlocks),
		maxModelLen:  min(prof.Model.MaxModelLen, int(numBlocks)*BlockSize),
		byID:         make(map[uint64]*request),
		adapterIndex: make(map[string]int32),
	}
	e.pod = e.freshPod(splitmix.Source(cfg.Seed), newPodStats())
	return e, nil
}

// freshPod is an idle pod on e's KV cache: at start, and after a crash (which
// keeps the random stream and the counters, as a scrape across a restart of
// one exporter would not, but the benchmark's window sums need).
func (e *Engine) freshPod(rng splitmix.Source, stats *podStats) pod {
	n := len(e.adapterNames)
	return pod{
		prof:           &e.prof,
		maxNumSeqs:     e.cfg.MaxNumSeqs,
		budget:         int32(e.cfg.MaxNumBatchedTokens),
		maxLoras:       e.cfg.MaxLoras,
		loraLoad:       e.cfg.LoRALoadTime,
		jitter:         e.cfg.SpeedJitter,
		rng:            rng,
		kv:             e.kv,
		stats:          stats,
		recycle:        e.recycle,
		adapterRunning: make([]int32, n),
		adapterWaiting: make([]int32, n),
		adapterStep:    make([]uint64, n),
	}
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// Profile returns the cost coefficients the engine runs with.
func (e *Engine) Profile() Profile { return e.prof }

// MaxModelLen is the longest prompt plus output a request may have: the model's
// context length, or the KV cache if that is smaller.
func (e *Engine) MaxModelLen() int { return e.maxModelLen }

// Now is the latest time the engine was told.
func (e *Engine) Now() time.Duration { return e.now }

// SetTokenEvents turns EventToken on or off (off by default: the benchmark needs
// only first tokens and finishes, and a token event per sequence per step would
// dominate its cost).
func (e *Engine) SetTokenEvents(on bool) { e.pod.emitTokens = on }

// Submit adds a request arriving at now. Steps that end at or before now are
// completed first; their events are returned by the next Advance.
func (e *Engine) Submit(req Request, now time.Duration) error {
	if now < e.now {
		return ErrTimeBackwards
	}
	if _, dup := e.byID[req.ID]; dup {
		return fmt.Errorf("%w: %d", ErrDuplicateID, req.ID)
	}
	if len(req.Prompt) == 0 {
		return errors.New("sim: empty prompt")
	}
	if req.OutputTokens < 1 {
		return fmt.Errorf("sim: output length must be at least 1, got %d", req.OutputTokens)
	}
	if total := len(req.Prompt) + req.OutputTokens; total > e.maxModelLen {
		return fmt.Errorf("sim: prompt of %d tokens plus %d output tokens exceeds the maximum model length %d",
			len(req.Prompt), req.OutputTokens, e.maxModelLen)
	}
	if req.Adapter != "" && e.cfg.MaxLoras == 0 {
		return ErrLoRADisabled
	}
	e.resetEvents()
	e.advanceTo(now)
	switch {
	case e.faults.Active(FaultCrash, now):
		return ErrRefused
	case e.faults.Active(FaultFailFast, now):
		return ErrFailFast
	}
	adapter := int32(noAdapter)
	if req.Adapter != "" {
		adapter = e.adapter(req.Adapter)
	}

	r := e.newRequest()
	r.id = req.ID
	r.adapter = adapter
	r.hashSeed = tokenizer.HashSeed(req.Adapter)
	r.arrival = now
	r.promptLen = int32(len(req.Prompt))
	r.outputLen = int32(req.OutputTokens)
	r.endsWithStop = req.EndsWithStop
	r.hashes = tokenizer.BlockHashes(r.hashes[:0], r.hashSeed, req.Prompt, BlockSize)
	if e.kv.events != nil {
		r.adapterName = req.Adapter
		r.prompt = append(r.prompt[:0], req.Prompt...)
	}
	r.tail = append(r.tail[:0], req.Prompt[len(req.Prompt)/BlockSize*BlockSize:]...)
	e.byID[r.id] = r
	e.pod.waiting.pushBack(r)
	e.pod.noteAdapter(r, +1, 0)
	if !e.pod.busy {
		e.pod.startStep(now)
	}
	return nil
}

// Abort removes a request (a client went away); false if it is not in flight.
// Its blocks are freed at once, or at the end of the step computing it.
func (e *Engine) Abort(id uint64, now time.Duration) bool {
	e.resetEvents()
	e.advanceTo(max(now, e.now))
	r, ok := e.byID[id]
	if !ok {
		return false
	}
	r.aborted = true
	e.pod.stats.aborted++
	switch {
	case r.scheduled > 0:
		// The step in flight still computes it; completeStep drops it.
	case e.pod.waiting.remove(r):
		e.pod.noteAdapter(r, -1, 0)
		e.recycle(r)
	default:
		e.pod.removeFinished()
	}
	if !e.pod.busy && e.pod.hasWork() {
		e.pod.startStep(e.now)
	}
	return true
}

// NextEventTime is when the step in flight ends, or a crash fault resets the
// requests in flight if that comes first; false if the pod is idle.
func (e *Engine) NextEventTime() (time.Duration, bool) {
	if e.crashed < len(e.crashes) && len(e.byID) > 0 && (!e.pod.busy || e.crashes[e.crashed] < e.pod.stepEnd) {
		return max(e.crashes[e.crashed], e.now), true
	}
	return e.pod.stepEnd, e.pod.busy
}

// Advance completes every step ending at or before to and returns the events
// produced since the previous Advance, in time order. The slice is reused: it is
// valid until the next call of Submit, Abort or Advance.
func (e *Engine) Advance(to time.Duration) []Event {
	e.resetEvents()
	e.advanceTo(max(to, e.now))
	e.eventsReturned = true
	return e.pod.events
}

func (e *Engine) advanceTo(t time.Duration) {
	for e.crashed < len(e.crashes) && e.crashes[e.crashed] <= t {
		at := max(e.crashes[e.crashed], e.now)
		e.pod.advanceTo(at)
		e.crash(at)
		e.crashed++
	}
	e.pod.advanceTo(t)
	e.now = t
}

func (e *Engine) resetEvents() {
	if e.eventsReturned {
		e.pod.events = e.pod.events[:0]
		e.eventsReturned = false
	}
}

// adapter returns the index of a named adapter, registering it on first sight.
func (e *Engine) adapter(name string) int32 {
	if i, ok := e.adapterIndex[name]; ok {
		return i
	}
	i := int32(len(e.adapterNames))
	e.adapterIndex[name] = i
	e.adapterNames = append(e.adapterNames, name)
	e.pod.adapterRunning = append(e.pod.adapterRunning, 0)
	e.pod.adapterWaiting = append(e.pod.adapterWaiting, 0)
	e.pod.adapterStep = append(e.pod.adapterStep, 0)
	return i
}

func (e *Engine) newRequest() *request {
	if n := len(e.pool); n > 0 {
		r := e.pool[n-1]
		e.pool = e.pool[:n-1]
		return r
	}
	return &request{}
}

// recycle forgets a request that left the pod and keeps its buffers for reuse.
func (e *Engine) recycle(r *request) {
	delete(e.byID, r.id)
	*r = request{hashes: r.hashes[:0], tail: r.tail[:0], blocks: r.blocks[:0], prompt: r.prompt[:0], ext: r.ext[:0]}
	e.pool = append(e.pool, r)
}

// Snapshot returns the pod's observable state.
func (e *Engine) Snapshot() Snapshot {
	var s Snapshot
	e.SnapshotInto(&s)
	return s
}

// SnapshotInto fills s, reusing its slices: cheap enough to call on every scrape
// of a simulated fleet.
func (e *Engine) SnapshotInto(s *Snapshot) {
	st := e.pod.stats
	s.Time = e.now
	s.Running = len(e.pod.running)
	s.Waiting = e.pod.waiting.len()
	s.BlockSize = BlockSize
	s.NumBlocks = int(e.kv.numBlocks)
	s.KVCacheUsage = float64(e.kv.numBlocks-e.kv.free) / float64(e.kv.numBlocks)
	s.MaxLoras = e.cfg.MaxLoras
	s.RunningAdapters = sortedInto(s.RunningAdapters, e.adapterNames, e.pod.adapterRunning)
	s.WaitingAdapters = sortedInto(s.WaitingAdapters, e.adapterNames, e.pod.adapterWaiting)
	s.ResidentAdapters = s.ResidentAdapters[:0]
	for _, a := range e.pod.slots.adapters {
		s.ResidentAdapters = append(s.ResidentAdapters, e.adapterNames[a])
	}
	slices.Sort(s.ResidentAdapters)
	s.PrefixCacheQueries, s.PrefixCacheHits = st.prefixQueries, st.prefixHits
	s.Preemptions = st.preemptions
	s.PromptTokens, s.GenerationTokens = st.promptTokens, st.generationTokens
	s.FinishedStop, s.FinishedLength, s.Aborted = st.finishedStop, st.finishedLength, st.aborted
	s.LoRALoads, s.Steps = st.loraLoads, st.steps
	s.WaitingPrefillTokens = 0
	for _, r := range e.pod.waiting.all() {
		s.WaitingPrefillTokens += int64(r.numTokens() - r.computed)
	}
	st.ttft.copyInto(&s.TTFT)
	st.itl.copyInto(&s.ITL)
	st.e2e.copyInto(&s.E2E)
	st.queue.copyInto(&s.QueueTime)
	if e.faults.Active(FaultFailFast, e.now) {
		// The exporter of a broken server still answers, with nothing running.
		s.Running, s.Waiting, s.KVCacheUsage, s.WaitingPrefillTokens = 0, 0, 0, 0
		s.RunningAdapters, s.WaitingAdapters = s.RunningAdapters[:0], s.WaitingAdapters[:0]
	}
}
