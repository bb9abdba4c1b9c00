package sim

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
)

// pod is one engine's scheduler and state. The Engine runs a real pod; the TTFT
// predictor runs a shadow copy of it with a counting KV cache, so both share one
// implementation of scheduling and step timing.
type pod struct {
	prof       *Profile
	maxNumSeqs int
	budget     int32
	maxLoras   int
	loraLoad   time.Duration
	jitter     float64
	rng        splitmix.Source
	kv         kvManager

	running []*request
	waiting requestQueue
	// batch is what the step in flight computes, in running order.
	batch []*request

	// Per adapter index: running and waiting requests, and the step that last used it.
	adapterRunning  []int32
	adapterWaiting  []int32
	adapterStep     []uint64
	adaptersRunning int
	slots           loraSlots
	stepAdapters    []int32

	busy      bool
	stepStart time.Duration
	stepEnd   time.Duration
	stepNo    uint64

	// shadow marks the predictor's copy, whose approximate KV accounting may
	// strand requests; it then stops instead of failing.
	shadow bool
	// stats is nil in the shadow pod.
	stats      *podStats
	events     []Event
	emitTokens bool
	// recycle receives every request that leaves the pod.
	recycle func(*request)
	// faults, when set, stretch steps over hangs and slow-downs.
	faults Faults
	// afterSchedule, when set, runs after each scheduling pass with the step's
	// start (the engine publishes the pass's KV events).
	afterSchedule func(at time.Duration)
}

// loraSlots are the adapters resident on the GPU, evicted least recently used.
type loraSlots struct {
	adapters []int32
	lastUsed []uint64
}

// use marks adapter as used by step, loading it into a slot if needed (evicting
// the least recently used adapter that the step does not use); it reports
// whether a load was needed.
func (s *loraSlots) use(adapter int32, step uint64, capacity int, adapterStep []uint64) (loaded bool) {
	victim := -1
	for i, a := range s.adapters {
		if a == adapter {
			s.lastUsed[i] = step
			return false
		}
		if adapterStep[a] != step && (victim < 0 || s.lastUsed[i] < s.lastUsed[victim]) {
			victim = i
		}
	}
	if len(s.adapters) < capacity {
		s.adapters = append(s.adapters, adapter)
		s.lastUsed = append(s.lastUsed, step)
		return true
	}
	s.adapters[victim], s.lastUsed[victim] = adapter, step
	return true
}

func (p *pod) hasWork() bool { return len(p.running) > 0 || p.waiting.len() > 0 }

// startStep schedules the next step at time at; the pod goes idle if there is
// nothing to run.
func (p *pod) startStep(at time.Duration) {
	p.stepStart = at
	// A pass that preempts admits nothing, so a pod whose only request preempted
	// itself schedules it again on the second pass.
	for pass := 0; pass < 2 && len(p.batch) == 0 && p.hasWork(); pass++ {
		p.schedule()
	}
	if p.afterSchedule != nil {
		p.afterSchedule(at)
	}
	if len(p.batch) == 0 {
		if p.hasWork() && !p.shadow {
			panic(fmt.Sprintf("sim: pod with %d running and %d waiting requests scheduled nothing", len(p.running), p.waiting.len()))
		}
		p.busy = false
		return
	}
	p.busy = true
	if p.faults != nil {
		p.stepEnd = p.faults.finish(at, p.stepDuration())
	} else {
		p.stepEnd = at + p.stepDuration()
	}
}

// schedule fills p.batch as vLLM's scheduler does: running requests first, in
// order, each taking the tokens it needs from the step's token budget and
// preempting the most recently admitted request when the KV cache is full; then,
// if nothing was preempted, waiting requests in arrival order while sequence
// slots, budget and KV blocks last. A waiting request whose adapter would exceed
// the adapter slots is skipped, not blocking those behind it.
func (p *pod) schedule() {
	budget := p.budget
	preempted := false
	for i := 0; i < len(p.running) && budget > 0; i++ {
		r := p.running[i]
		n := min(r.numTokens()-r.computed, budget)
		for !p.kv.grow(r, r.computed+n) {
			victim := p.running[len(p.running)-1]
			p.preempt(victim)
			preempted = true
			if victim == r {
				n = 0
				break
			}
		}
		if n == 0 {
			break
		}
		p.addToBatch(r, n)
		budget -= n
	}
	if preempted {
		return
	}
	for skipped := 0; skipped < p.waiting.len() && len(p.running) < p.maxNumSeqs && budget > 0; {
		r := p.waiting.at(skipped)
		if r.adapter != noAdapter && p.adapterRunning[r.adapter] == 0 && p.adaptersRunning >= p.maxLoras {
			skipped++
			continue
		}
		hit := p.kv.lookupHit(r)
		computed := hit * BlockSize
		n := min(r.numTokens()-computed, budget)
		if !p.kv.admit(r, hit, computed+n) {
			break
		}
		p.waiting.removeAt(skipped)
		p.noteAdapter(r, -1, +1)
		r.computed = computed
		if p.stats != nil {
			p.stats.prefixQueries += uint64(r.numTokens())
			p.stats.prefixHits += uint64(computed)
			if !r.admitted {
				p.stats.queue.observe(p.stepStart-r.arrival, 1)
			}
		}
		if !r.admitted {
			r.admitted = true
			r.cachedTokens = computed
		}
		p.running = append(p.running, r)
		p.addToBatch(r, n)
		budget -= n
	}
}

func (p *pod) addToBatch(r *request, n int32) {
	r.scheduled = n
	p.batch = append(p.batch, r)
}

// noteAdapter moves r's adapter between the waiting and running counts.
func (p *pod) noteAdapter(r *request, waiting, running int32) {
	if r.adapter == noAdapter {
		return
	}
	p.adapterWaiting[r.adapter] += waiting
	if p.adapterRunning[r.adapter] == 0 && running > 0 {
		p.adaptersRunning++
	}
	p.adapterRunning[r.adapter] += running
	if p.adapterRunning[r.adapter] == 0 && running < 0 {
		p.adaptersRunning--
	}
}

// preempt evicts the last running request (vLLM's recompute preemption): its
// blocks are freed and it waits at the front of the queue to recompute its
// prompt and output so far, usually largely from the prefix cache.
func (p *pod) preempt(r *request) {
	p.running = p.running[:len(p.running)-1]
	p.kv.release(r)
	r.computed = 0
	r.preemptions++
	// The shadow pod assumes the released blocks are still cached when r returns.
	r.shadowHit = (r.numTokens() - 1) / BlockSize
	r.sharedBlocks = 0
	p.noteAdapter(r, +1, -1)
	p.waiting.pushFront(r)
	if p.stats != nil {
		p.stats.preemptions++
	}
}

// stepDuration prices p.batch with the profile's formula, the adapters it uses,
// adapter loads and jitter.
func (p *pod) stepDuration() time.Duration {
	p.stepNo++
	var prefill, decodes int
	var context int64
	p.stepAdapters = p.stepAdapters[:0]
	for _, r := range p.batch {
		if r.isDecode() {
			decodes++
			context += int64(r.computed) + 1
		} else {
			prefill += int(r.scheduled)
		}
		if r.adapter != noAdapter && p.adapterStep[r.adapter] != p.stepNo {
			p.adapterStep[r.adapter] = p.stepNo
			p.stepAdapters = append(p.stepAdapters, r.adapter)
		}
	}
	var loads int
	for _, a := range p.stepAdapters {
		if p.slots.use(a, p.stepNo, p.maxLoras, p.adapterStep) {
			loads++
		}
	}
	s := p.prof.StepSeconds(prefill, decodes, context, len(p.stepAdapters))
	if p.jitter > 0 {
		s *= 1 + p.jitter*symmetric(&p.rng)
	}
	if p.stats != nil {
		p.stats.loraLoads += uint64(loads)
		p.stats.steps++
	}
	return seconds(s) + time.Duration(loads)*p.loraLoad
}

// completeStep applies the step in flight at its end time: computed tokens
// advance, requests whose known tokens are all computed sample one, and finished
// requests leave.
func (p *pod) completeStep() {
	end, start := p.stepEnd, p.stepStart
	leaving := 0
	var generated uint64
	var steadyTokens uint64 // tokens whose previous token ended the previous step
	for _, r := range p.batch {
		n := r.scheduled
		r.scheduled = 0
		if r.aborted {
			leaving++
			continue
		}
		r.computed += n
		if r.computed < r.numTokens() {
			continue // a prompt chunk; the prompt is not done yet
		}
		r.generated++
		generated++
		if r.generated == 1 {
			r.firstTokenAt = end
			p.emit(EventFirstToken, r, end)
			if p.stats != nil {
				p.stats.ttft.observe(end-r.arrival, 1)
				p.stats.promptTokens += uint64(r.promptLen)
			}
		} else {
			if p.emitTokens {
				p.emit(EventToken, r, end)
			}
			if p.stats != nil {
				if r.lastTokenAt == start {
					steadyTokens++
				} else {
					p.stats.itl.observe(end-r.lastTokenAt, 1)
				}
			}
		}
		r.lastTokenAt = end
		if r.generated == r.outputLen {
			r.done = true
			leaving++
			p.emit(EventFinish, r, end)
			if p.stats != nil {
				p.stats.e2e.observe(end-r.arrival, 1)
				if r.endsWithStop {
					p.stats.finishedStop++
				} else {
					p.stats.finishedLength++
				}
			}
		}
	}
	if p.stats != nil {
		p.stats.generationTokens += generated
		if steadyTokens > 0 {
			p.stats.itl.observe(end-start, steadyTokens)
		}
	}
	p.batch = p.batch[:0]
	if leaving > 0 {
		p.removeFinished()
	}
}

// removeFinished drops finished and aborted requests from the running list.
func (p *pod) removeFinished() {
	kept := p.running[:0]
	for _, r := range p.running {
		if !r.done && !r.aborted {
			kept = append(kept, r)
			continue
		}
		p.leave(r)
	}
	clear(p.running[len(kept):])
	p.running = kept
}

// leave releases a running request that finished or was aborted.
func (p *pod) leave(r *request) {
	p.noteAdapter(r, 0, -1)
	p.kv.release(r)
	if p.recycle != nil {
		p.recycle(r)
	}
}

func (p *pod) emit(kind EventKind, r *request, at time.Duration) {
	if p.shadow {
		return // the predictor reads its target's state instead
	}
	ev := Event{Kind: kind, RequestID: r.id, Time: at, Tokens: int(r.generated)}
	if kind == EventFinish {
		ev.Arrival = r.arrival
		ev.FirstToken = r.firstTokenAt
		ev.PromptTokens = int(r.promptLen)
		ev.CachedTokens = int(r.cachedTokens)
		ev.Preemptions = int(r.preemptions)
	}
	p.events = append(p.events, ev)
}

// advanceTo completes every step that ends at or before t.
func (p *pod) advanceTo(t time.Duration) {
	for p.busy && p.stepEnd <= t {
		p.completeStep()
		p.startStep(p.stepEnd)
	}
}
