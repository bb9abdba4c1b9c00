package sim

import (
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// timeline is what one request went through, collected from events.
type timeline struct {
	arrival, first, finish time.Duration
	tokens                 []time.Duration
	cached, preemptions    int
}

// drive submits reqs at their arrival times and runs the engine until idle.
func drive(t testing.TB, e *Engine, reqs []Request, arrivals []time.Duration) map[uint64]*timeline {
	t.Helper()
	out := map[uint64]*timeline{}
	collect := func(evs []Event) {
		for _, ev := range evs {
			tl := out[ev.RequestID]
			if tl == nil {
				continue // a request submitted before drive was called
			}
			switch ev.Kind {
			case EventFirstToken:
				tl.first = ev.Time
				tl.tokens = append(tl.tokens, ev.Time)
			case EventToken:
				if ev.Tokens != len(tl.tokens)+1 {
					t.Fatalf("request %d: token event %d after %d tokens", ev.RequestID, ev.Tokens, len(tl.tokens))
				}
				tl.tokens = append(tl.tokens, ev.Time)
			case EventFinish:
				tl.finish, tl.cached, tl.preemptions = ev.Time, ev.CachedTokens, ev.Preemptions
				if ev.FirstToken != tl.first || ev.Arrival != tl.arrival {
					t.Fatalf("request %d: finish event disagrees with earlier events", ev.RequestID)
				}
			}
		}
	}
	for i, r := range reqs {
		out[r.ID] = &timeline{arrival: arrivals[i]}
	}
	submitAt(t, e, reqs, arrivals, collect)
	drain(e, collect)
	collect(e.Advance(e.Now()))
	return out
}

// submitAt submits reqs at their arrival times, advancing the engine to each
// first and handing the events to collect (nil: dropped).
func submitAt(t testing.TB, e *Engine, reqs []Request, arrivals []time.Duration, collect func([]Event)) {
	t.Helper()
	for i, r := range reqs {
		if evs := e.Advance(arrivals[i]); collect != nil {
			collect(evs)
		}
		if err := e.Submit(r, arrivals[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// drain runs the engine until it is idle, handing the events to collect (nil: dropped).
func drain(e *Engine, collect func([]Event)) {
	for {
		next, ok := e.NextEventTime()
		if !ok {
			return
		}
		if evs := e.Advance(next); collect != nil {
			collect(evs)
		}
	}
}

// submitAtZero submits one request per adapter name ("" for the base model)
// at time 0, request i with a 100-token prompt of seed i and output tokens.
func submitAtZero(t testing.TB, e *Engine, output int, adapters ...string) {
	t.Helper()
	for i, a := range adapters {
		if err := e.Submit(Request{ID: uint64(i), Prompt: prompt(uint64(i), 100), OutputTokens: output, Adapter: a}, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.SetTokenEvents(true)
	return e
}

func prompt(seed uint64, tokens int) []uint32 {
	return tokenizer.Tokenize(tokenizer.GenerateText(seed, tokens))
}

func at(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func TestSingleRequestMatchesAnalyticTimes(t *testing.T) {
	for _, gpu := range []string{"H100", "A10G"} {
		for _, promptLen := range []int{100, 1000, 10000} {
			e := newEngine(t, Config{GPU: gpu, Model: "llama-3.1-8b"})
			const out = 20
			tl := drive(t, e, []Request{{ID: 1, Prompt: prompt(1, promptLen), OutputTokens: out}}, []time.Duration{0})[1]
			p := e.Profile()
			wantTTFT := p.AnalyticTTFT(promptLen, 0, DefaultMaxNumBatchedTokens)
			if d := tl.first - wantTTFT; d < -time.Nanosecond || d > time.Nanosecond*time.Duration((promptLen+8191)/8192) {
				t.Errorf("%s prompt %d: TTFT %v, analytic %v", gpu, promptLen, tl.first, wantTTFT)
			}
			if len(tl.tokens) != out {
				t.Fatalf("%s: %d tokens, want %d", gpu, len(tl.tokens), out)
			}
			for k := 1; k < out; k++ {
				// Token k+1 is sampled by a decode step that computes token promptLen+k.
				want := p.AnalyticITL(promptLen + k)
				if got := tl.tokens[k] - tl.tokens[k-1]; got != want {
					t.Fatalf("%s prompt %d: ITL of token %d = %v, want %v", gpu, promptLen, k+1, got, want)
				}
			}
			if tl.finish != tl.tokens[out-1] {
				t.Errorf("finish at %v, last token at %v", tl.finish, tl.tokens[out-1])
			}
		}
	}
}

func TestChunkedPrefillSplitsLongPrompts(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxNumBatchedTokens: 512})
	tl := drive(t, e, []Request{{ID: 1, Prompt: prompt(1, 2000), OutputTokens: 2}}, []time.Duration{0})[1]
	p := e.Profile()
	// 2000 tokens in chunks of 512: four steps, each paying the base cost.
	want := 4*p.Base + 2000*p.PerPrefillToken
	if !near(tl.first.Seconds(), want, 1e-8) {
		t.Errorf("TTFT %v, want %.6fs", tl.first, want)
	}
	if s := e.Snapshot(); s.Steps != 5 {
		t.Errorf("%d steps, want 4 prefill + 1 decode", s.Steps)
	}
}

func TestPrefixCacheLowersTTFTByCachedFraction(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b"})
	shared := tokenizer.GenerateText(5, 3008) // 188 whole blocks
	first := tokenizer.Tokenize(tokenizer.Join(shared, tokenizer.GenerateText(6, 992)))
	second := tokenizer.Tokenize(tokenizer.Join(shared, tokenizer.GenerateText(7, 992)))
	tls := drive(t, e, []Request{{ID: 1, Prompt: first, OutputTokens: 1}, {ID: 2, Prompt: second, OutputTokens: 1}},
		[]time.Duration{0, time.Second})
	if tls[1].cached != 0 {
		t.Errorf("first request found %d cached tokens in an empty cache", tls[1].cached)
	}
	if tls[2].cached != 3008 {
		t.Errorf("second request found %d cached tokens, want the 3008 shared", tls[2].cached)
	}
	p := e.Profile()
	ttft := tls[2].first - tls[2].arrival
	want := p.AnalyticTTFT(4000, 3008, DefaultMaxNumBatchedTokens)
	if ttft != want {
		t.Errorf("TTFT with 3008 of 4000 tokens cached = %v, want %v", ttft, want)
	}
	// The saving is the cached fraction of the prefill work.
	saved := (tls[1].first - tls[1].arrival - ttft).Seconds()
	if !near(saved, 3008*p.PerPrefillToken, 1e-8) {
		t.Errorf("cache saved %.6fs, want 3008 tokens of prefill %.6fs", saved, 3008*p.PerPrefillToken)
	}
	s := e.Snapshot()
	if s.PrefixCacheQueries != 8000 || s.PrefixCacheHits != 3008 {
		t.Errorf("prefix cache queries/hits %d/%d, want 8000/3008", s.PrefixCacheQueries, s.PrefixCacheHits)
	}
}

func TestIdenticalPromptRecomputesLastToken(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b"})
	pr := prompt(3, 64) // exactly four blocks
	tls := drive(t, e, []Request{{ID: 1, Prompt: pr, OutputTokens: 1}, {ID: 2, Prompt: pr, OutputTokens: 1}},
		[]time.Duration{0, time.Second})
	// At least one token is computed to sample from, so the last block misses.
	if tls[2].cached != 48 {
		t.Errorf("cached %d tokens of an identical 64-token prompt, want 48", tls[2].cached)
	}
}

func TestAdapterSeparatesPrefixCache(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxLoras: 2})
	pr := prompt(3, 500)
	tls := drive(t, e, []Request{{ID: 1, Prompt: pr, OutputTokens: 1}, {ID: 2, Prompt: pr, OutputTokens: 1, Adapter: "a"}},
		[]time.Duration{0, time.Second})
	if tls[2].cached != 0 {
		t.Errorf("adapter request reused %d tokens cached by the base model", tls[2].cached)
	}
}

func TestContinuousBatchingRespectsMaxNumSeqs(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxNumSeqs: 2})
	submitAtZero(t, e, 50, "", "", "", "", "")
	e.Advance(at(100))
	if s := e.Snapshot(); s.Running != 2 || s.Waiting != 3 {
		t.Fatalf("running %d waiting %d, want 2 and 3", s.Running, s.Waiting)
	}
}

func TestBatchingSharesSteps(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b"})
	var reqs []Request
	var arrivals []time.Duration
	for i := range 8 {
		reqs = append(reqs, Request{ID: uint64(i), Prompt: prompt(uint64(i), 200), OutputTokens: 30})
		arrivals = append(arrivals, 0)
	}
	tls := drive(t, e, reqs, arrivals)
	// Request 0 starts a step at once; the other seven join at the next step
	// boundary, prefilled together alongside request 0's first decode.
	for i := 2; i < 8; i++ {
		if tls[uint64(i)].first != tls[1].first || tls[uint64(i)].finish != tls[1].finish {
			t.Fatalf("request %d did not share steps with request 1", i)
		}
	}
	if tls[1].first != tls[0].tokens[1] {
		t.Errorf("late arrivals' prefill ended at %v, not with request 0's second token at %v", tls[1].first, tls[0].tokens[1])
	}
	if s := e.Snapshot(); s.Steps != 31 {
		t.Errorf("%d steps, want 31", s.Steps)
	}
}

func TestFullKVCachePreemptsAndRecovers(t *testing.T) {
	// 4096 tokens of KV; eight requests of 300+400 tokens cannot all stay resident.
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", KVCacheTokens: 4096})
	var reqs []Request
	var arrivals []time.Duration
	for i := range 8 {
		reqs = append(reqs, Request{ID: uint64(i), Prompt: prompt(uint64(i), 300), OutputTokens: 400})
		arrivals = append(arrivals, at(float64(i)))
	}
	var sawWaiting bool
	for i, r := range reqs {
		e.Advance(arrivals[i])
		if err := e.Submit(r, arrivals[i]); err != nil {
			t.Fatal(err)
		}
	}
	done := map[uint64]int{}
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		for _, ev := range e.Advance(next) {
			if ev.Kind == EventFinish {
				done[ev.RequestID] = ev.Tokens
			}
		}
		if s := e.Snapshot(); s.Waiting > 0 && s.Running > 0 {
			sawWaiting = true
		}
	}
	s := e.Snapshot()
	if s.Preemptions == 0 || !sawWaiting {
		t.Fatalf("preemptions %d, saw waiting %v: the cache never filled", s.Preemptions, sawWaiting)
	}
	for _, r := range reqs {
		if done[r.ID] != 400 {
			t.Errorf("request %d finished with %d tokens, want 400", r.ID, done[r.ID])
		}
	}
	if s.KVCacheUsage != 0 || s.Running != 0 || s.Waiting != 0 {
		t.Errorf("idle pod holds KV %.3f, %d running, %d waiting", s.KVCacheUsage, s.Running, s.Waiting)
	}
	// Recompute after preemption reads the victim's own blocks back from the cache.
	if s.PrefixCacheHits == 0 {
		t.Error("no prefix-cache hits after preemptions")
	}
}

func TestLoRALoadPaidOncePerResidency(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxLoras: 1, LoRALoadTime: 200 * time.Millisecond})
	p := e.Profile()
	pr := prompt(1, 100)
	tls := drive(t, e, []Request{
		{ID: 1, Prompt: pr, OutputTokens: 1, Adapter: "a"},
		{ID: 2, Prompt: prompt(2, 100), OutputTokens: 1, Adapter: "a"},
		{ID: 3, Prompt: prompt(3, 100), OutputTokens: 1, Adapter: "b"},
	}, []time.Duration{0, time.Second, 2 * time.Second})
	base := seconds(p.StepSeconds(100, 0, 0, 1))
	if got := tls[1].first - tls[1].arrival; got != base+200*time.Millisecond {
		t.Errorf("first request for adapter a: TTFT %v, want %v + load", got, base)
	}
	if got := tls[2].first - tls[2].arrival; got != base {
		t.Errorf("second request for resident adapter a: TTFT %v, want %v", got, base)
	}
	if got := tls[3].first - tls[3].arrival; got != base+200*time.Millisecond {
		t.Errorf("adapter b evicting a: TTFT %v, want %v + load", got, base)
	}
	if s := e.Snapshot(); s.LoRALoads != 2 || len(s.ResidentAdapters) != 1 || s.ResidentAdapters[0] != "b" {
		t.Errorf("loads %d resident %v, want 2 loads and [b]", s.LoRALoads, s.ResidentAdapters)
	}
}

func TestLoRASlotsLimitRunningAdapters(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxLoras: 1})
	submitAtZero(t, e, 100, "a", "b", "a", "")
	e.Advance(at(200))
	s := e.Snapshot()
	// b waits for a's slot; the second a and the base request do not wait behind b.
	if s.Running != 3 || s.Waiting != 1 {
		t.Fatalf("running %d waiting %d, want 3 and 1", s.Running, s.Waiting)
	}
	if len(s.RunningAdapters) != 1 || s.RunningAdapters[0] != "a" || len(s.WaitingAdapters) != 1 || s.WaitingAdapters[0] != "b" {
		t.Fatalf("running adapters %v waiting %v, want [a] and [b]", s.RunningAdapters, s.WaitingAdapters)
	}
	if _, err := New(Config{GPU: "H100", Model: "llama-3.1-8b"}); err != nil {
		t.Fatal(err)
	}
	noLoRA := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b"})
	if err := noLoRA.Submit(Request{ID: 1, Prompt: prompt(1, 10), OutputTokens: 1, Adapter: "a"}, 0); err == nil {
		t.Fatal("adapter request accepted by a pod without adapter slots")
	}
}

func TestJitterIsDeterministicAndBounded(t *testing.T) {
	run := func(seed uint64) map[uint64]*timeline {
		e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", SpeedJitter: 0.05, Seed: seed})
		return drive(t, e, []Request{{ID: 1, Prompt: prompt(1, 500), OutputTokens: 200}}, []time.Duration{0})
	}
	a, b, c := run(1)[1], run(1)[1], run(2)[1]
	p := mustProfile(t, "H100", "llama-3.1-8b", 1)
	differs := false
	for k := range a.tokens {
		if a.tokens[k] != b.tokens[k] {
			t.Fatalf("same seed, token %d at %v and %v", k, a.tokens[k], b.tokens[k])
		}
		if a.tokens[k] != c.tokens[k] {
			differs = true
		}
		if k > 0 {
			nominal := p.AnalyticITL(500 + k).Seconds()
			got := (a.tokens[k] - a.tokens[k-1]).Seconds()
			if got < nominal*0.95-1e-9 || got > nominal*1.05+1e-9 {
				t.Fatalf("ITL %v outside ±5%% of %.6fs", got, nominal)
			}
		}
	}
	if !differs {
		t.Fatal("different seeds gave identical timings")
	}
}

func TestAbortFreesResources(t *testing.T) {
	e := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxNumSeqs: 1})
	submitAtZero(t, e, 1000, "", "", "")
	e.Advance(at(50))
	if !e.Abort(2, at(50)) || !e.Abort(0, at(50)) || e.Abort(99, at(50)) {
		t.Fatal("Abort reported wrongly")
	}
	e.Advance(at(100))
	s := e.Snapshot()
	if s.Running != 1 || s.Waiting != 0 || s.Aborted != 2 {
		t.Fatalf("after aborts running %d waiting %d aborted %d", s.Running, s.Waiting, s.Aborted)
	}
	if err := e.Submit(Request{ID: 0, Prompt: prompt(0, 10), OutputTokens: 1}, at(100)); err != nil {
		t.Fatalf("ID of an aborted request not reusable: %v", err)
	}
}

func TestSubmitValidates(t *testing.T) {
	e := newEngine(t, Config{GPU: "A10G", Model: "llama-3.1-8b"})
	if err := e.Submit(Request{ID: 1, Prompt: prompt(1, 10), OutputTokens: 5}, at(10)); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Request{
		"duplicate":  {ID: 1, Prompt: prompt(1, 10), OutputTokens: 5},
		"empty":      {ID: 2, OutputTokens: 5},
		"no output":  {ID: 3, Prompt: prompt(1, 10)},
		"too long":   {ID: 4, Prompt: prompt(1, e.MaxModelLen()), OutputTokens: 1},
		"no adapter": {ID: 5, Prompt: prompt(1, 10), OutputTokens: 1, Adapter: "x"},
	} {
		if err := e.Submit(r, at(10)); err == nil {
			t.Errorf("%s request accepted", name)
		}
	}
	if err := e.Submit(Request{ID: 6, Prompt: prompt(1, 10), OutputTokens: 1}, at(5)); err == nil {
		t.Error("submission in the past accepted")
	}
	// A10G holds ~38k tokens, less than the model's context.
	if e.MaxModelLen() >= 131072 || e.MaxModelLen() < 30000 {
		t.Errorf("A10G max model len %d", e.MaxModelLen())
	}
}

func TestSameSequenceSameEvents(t *testing.T) {
	run := func() map[uint64]*timeline {
		e := newEngine(t, Config{GPU: "L40S", Model: "llama-3.1-8b", SpeedJitter: 0.1, Seed: 9, MaxLoras: 2, KVCacheTokens: 20000})
		reqs, arrivals := randomWorkload(42, 60)
		return drive(t, e, reqs, arrivals)
	}
	a, b := run(), run()
	for id, ta := range a {
		tb := b[id]
		if ta.first != tb.first || ta.finish != tb.finish || len(ta.tokens) != len(tb.tokens) {
			t.Fatalf("request %d differs between identical runs", id)
		}
	}
}

// randomWorkload mixes shared prefixes, adapters, long and short requests.
func randomWorkload(seed uint64, n int) ([]Request, []time.Duration) {
	rng := splitmix.Source(seed)
	var reqs []Request
	var arrivals []time.Duration
	var t time.Duration
	systems := []string{tokenizer.GenerateText(100, 800), tokenizer.GenerateText(101, 1500)}
	for i := range n {
		t += time.Duration(rng.Next() % uint64(80*time.Millisecond))
		text := tokenizer.GenerateText(rng.Next(), 20+int(rng.Next()%1500))
		if rng.Next()%2 == 0 {
			text = tokenizer.Join(systems[rng.Next()%2], text)
		}
		adapter := ""
		if rng.Next()%3 == 0 {
			adapter = []string{"a", "b", "c"}[rng.Next()%3]
		}
		reqs = append(reqs, Request{ID: uint64(i), Prompt: tokenizer.Tokenize(text), OutputTokens: 1 + int(rng.Next()%300), Adapter: adapter})
		arrivals = append(arrivals, t)
	}
	return reqs, arrivals
}

func TestRandomWorkloadInvariants(t *testing.T) {
	for seed := range uint64(5) {
		e := newEngine(t, Config{GPU: "A100", Model: "llama-3.1-8b", MaxNumSeqs: 16, MaxNumBatchedTokens: 1024,
			KVCacheTokens: 6000, MaxLoras: 2, SpeedJitter: 0.05, Seed: seed})
		reqs, arrivals := randomWorkload(seed, 80)
		tls := drive(t, e, reqs, arrivals)
		for _, r := range reqs {
			tl := tls[r.ID]
			if len(tl.tokens) != r.OutputTokens {
				t.Fatalf("seed %d request %d: %d tokens, want %d", seed, r.ID, len(tl.tokens), r.OutputTokens)
			}
			if tl.first <= tl.arrival || tl.finish < tl.first {
				t.Fatalf("seed %d request %d: arrival %v first %v finish %v", seed, r.ID, tl.arrival, tl.first, tl.finish)
			}
			for k := 1; k < len(tl.tokens); k++ {
				if tl.tokens[k] <= tl.tokens[k-1] {
					t.Fatalf("request %d: token %d not after token %d", r.ID, k, k-1)
				}
			}
		}
		checkKVConsistent(t, e)
		if s := e.Snapshot(); s.KVCacheUsage != 0 || s.Running+s.Waiting != 0 {
			t.Fatalf("seed %d: idle pod holds %.3f of KV", seed, s.KVCacheUsage)
		}
	}
}

// checkKVConsistent verifies the block cache's links, counts and index.
func checkKVConsistent(t *testing.T, e *Engine) {
	t.Helper()
	kv := e.kv
	var free int32
	for b := kv.head; b != none; b = kv.next[b] {
		if kv.refs[b] != 0 {
			t.Fatalf("block %d in the free queue with %d references", b, kv.refs[b])
		}
		free++
	}
	if free != kv.free {
		t.Fatalf("free queue has %d blocks, counter says %d", free, kv.free)
	}
	held := map[int32]int32{}
	for _, r := range e.pod.running {
		for _, b := range r.blocks {
			held[b]++
		}
	}
	for b := range kv.numBlocks {
		if kv.refs[b] != held[b] {
			t.Fatalf("block %d has %d references, held %d times", b, kv.refs[b], held[b])
		}
	}
	for h, b := range kv.index {
		if !kv.cached[b] || kv.hash[b] != h {
			t.Fatalf("index maps %x to block %d holding %x", h, b, kv.hash[b])
		}
	}
}
