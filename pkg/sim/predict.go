package sim

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// maxPredictSteps bounds a prediction on a hopelessly overloaded pod; the
// prediction is then a lower bound.
const maxPredictSteps = 50_000

// predictor holds the scratch state of PredictTTFT, reused between calls.
type predictor struct {
	shadow  pod
	kv      kvCounter
	copies  []request
	running []*request
	waiting []*request
	target  request
	hashes  []uint64
}

// PredictTTFT is the exact cost model the oracle policy routes with: the time
// from now until the first token of req if it were submitted now and nothing
// arrived after it. It runs the engine's own scheduler and step pricing (jitter
// draws included) forward on a copy of the pod's state, so it is exact except
// that the copy counts KV blocks instead of tracking them: every request's
// prefix-cache hit is fixed when the prediction starts (blocks in the cache now,
// or computed by a request ahead of it), and evictions during the wait are
// ignored. The engine is not changed.
func (e *Engine) PredictTTFT(req Request, now time.Duration) (time.Duration, error) {
	if len(req.Prompt) == 0 || req.OutputTokens < 1 {
		return 0, fmt.Errorf("sim: a prediction needs a prompt and an output length")
	}
	if req.Adapter != "" && e.cfg.MaxLoras == 0 {
		return 0, ErrLoRADisabled
	}
	now = max(now, e.now)
	pr := &e.predictor
	sh := e.copyToShadow()

	t := &pr.target
	*t = request{id: req.ID, adapter: noAdapter, arrival: now,
		promptLen: int32(len(req.Prompt)), outputLen: int32(req.OutputTokens)}
	seed := tokenizer.HashSeed(req.Adapter)
	if req.Adapter != "" {
		if i, ok := e.adapterIndex[req.Adapter]; ok {
			t.adapter = i
		} else {
			t.adapter = int32(len(e.adapterNames)) // one past the known adapters
		}
	}
	pr.hashes = tokenizer.BlockHashes(pr.hashes[:0], seed, req.Prompt, BlockSize)
	t.hashes = pr.hashes
	hit, idle := e.prefixHitEstimate(t.hashes, t.numTokens(), nil)
	t.shadowHit, t.sharedBlocks = hit, hit-idle

	sh.advanceTo(now)
	sh.waiting.pushBack(t)
	sh.noteAdapter(t, +1, 0)
	if !sh.busy {
		sh.startStep(now)
	}
	for steps := 0; t.generated == 0; steps++ {
		if !sh.busy || steps == maxPredictSteps {
			// Stranded by approximate accounting, or hopelessly far out: the time
			// reached plus the request's own prefill is the best estimate left.
			reached := max(sh.stepEnd, now)
			own := e.prof.AnalyticTTFT(int(t.promptLen), int(hit)*BlockSize, int(sh.budget))
			return reached - now + own, nil
		}
		sh.completeStep()
		sh.startStep(sh.stepEnd)
	}
	return t.firstTokenAt - now, nil
}

// copyToShadow copies the pod's state into the predictor's shadow pod.
func (e *Engine) copyToShadow() *pod {
	pr := &e.predictor
	real := &e.pod
	n := len(real.running) + real.waiting.len()
	if cap(pr.copies) < n {
		pr.copies = make([]request, n, 2*n)
	}
	pr.copies = pr.copies[:n]
	pr.running, pr.waiting = pr.running[:0], pr.waiting[:0]
	for i, r := range real.running {
		c := &pr.copies[i]
		*c = *r
		c.heldBlocks = int32(len(r.blocks))
		c.ownBlocks = c.heldBlocks - r.sharedBlocks
		pr.running = append(pr.running, c)
	}
	for j, r := range real.waiting.all() {
		c := &pr.copies[len(real.running)+j]
		*c = *r
		if r.preemptions > 0 || !r.hintKnown {
			r.hintBlocks, r.hintIdle = e.prefixHitEstimate(r.hashes, r.numTokens(), r)
			r.hintKnown = true
		}
		c.shadowHit, c.sharedBlocks = r.hintBlocks, r.hintBlocks-r.hintIdle
		pr.waiting = append(pr.waiting, c)
	}

	sh := &pr.shadow
	pr.kv.free = e.kv.free
	*sh = pod{
		prof:            real.prof,
		maxNumSeqs:      real.maxNumSeqs,
		budget:          real.budget,
		maxLoras:        real.maxLoras,
		loraLoad:        real.loraLoad,
		jitter:          real.jitter,
		rng:             real.rng,
		kv:              &pr.kv,
		running:         pr.running,
		waiting:         sh.waiting,
		batch:           sh.batch[:0],
		adapterRunning:  append(append(sh.adapterRunning[:0], real.adapterRunning...), 0),
		adapterWaiting:  append(append(sh.adapterWaiting[:0], real.adapterWaiting...), 0),
		adapterStep:     append(append(sh.adapterStep[:0], real.adapterStep...), 0),
		adaptersRunning: real.adaptersRunning,
		slots: loraSlots{
			adapters: append(sh.slots.adapters[:0], real.slots.adapters...),
			lastUsed: append(sh.slots.lastUsed[:0], real.slots.lastUsed...),
		},
		stepAdapters: sh.stepAdapters[:0],
		busy:         real.busy,
		stepStart:    real.stepStart,
		stepEnd:      real.stepEnd,
		stepNo:       real.stepNo,
		shadow:       true,
	}
	sh.waiting.setAll(pr.waiting)
	for _, c := range sh.running {
		if c.scheduled > 0 {
			sh.batch = append(sh.batch, c)
		}
	}
	return sh
}

// prefixHitEstimate is how many leading blocks of a prompt an admission can
// expect to find cached: those cached now, or computed by a request in flight
// ahead of it (all of them when ahead is nil, else those before ahead). idle
// counts the cached-now blocks nobody holds, which an admission takes out of the
// free pool.
func (e *Engine) prefixHitEstimate(hashes []uint64, numTokens int32, ahead *request) (blocks, idle int32) {
	maxBlocks := min((numTokens-1)/BlockSize, int32(len(hashes)))
	for blocks < maxBlocks {
		b, ok := e.kv.index[hashes[blocks]]
		if !ok {
			break
		}
		if e.kv.refs[b] == 0 {
			idle++
		}
		blocks++
	}
	longest := blocks
	consider := func(o *request) bool {
		if o == ahead {
			return false
		}
		if l := commonPrefix(hashes[:maxBlocks], o.hashes); l > longest {
			longest = l
		}
		return true
	}
	for _, o := range e.pod.running {
		if !consider(o) {
			return longest, idle
		}
	}
	for _, o := range e.pod.waiting.all() {
		if !consider(o) {
			break
		}
	}
	return longest, idle
}

func commonPrefix(a, b []uint64) int32 {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return int32(i)
}
