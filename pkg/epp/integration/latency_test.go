package integration

import (
	"context"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// TestPredictedLatencyPrefersFirstAnswer: with an H100 and an A10G simulator
// (prefill about 18× apart), the predicted-latency scorer learns both speeds
// from responses streamed through the ext_proc server, then sends requests to
// the H100 when the queues are equal (idle, then three waiting on each), and
// to the idle A10G once the H100 is queued so deep that the slow GPU answers
// first.
func TestPredictedLatencyPrefersFirstAnswer(t *testing.T) {
	base := simproc.Options{Config: sim.Config{Model: "llama-3.1-8b", MaxNumSeqs: 2}, Speedup: 10, ServedModelName: "m"}
	h100Opts, a10gOpts := base, base
	h100Opts.GPU, a10gOpts.GPU = "H100", "A10G"
	h100, a10g := simproc.Start(t, h100Opts), simproc.Start(t, a10gOpts)
	d, s := pickerOver(t, "scorers: [{plugin: predicted-latency, weight: 1}]", h100, a10g)
	scrapeContinuously(t, s)
	c := startGateway(t, d).client()
	fast, slow := endpoint(h100).Key(), endpoint(a10g).Key()

	// Every prompt differs, so that no prefix is cached anywhere and only
	// queues and speeds decide.
	const promptTokens = 2000
	seed := uint64(0)
	promptOf := func(tokens int) string { seed++; return tokenizer.GenerateText(seed, tokens) }
	prompt := func() string { return promptOf(promptTokens) }
	// The speeds are learned from long prompts: the H100 prefills 2,000
	// tokens in 7 ms at this speedup, which a loaded machine's scheduling
	// delays outweigh (learned at 12.6k tokens/s against the A10G's 14.9k in
	// one such run); 16,000 take it 58 ms.
	for _, ep := range []string{fast, slow} {
		for range 3 {
			if got := chat(t, c, promptOf(16000), "q", headerSubset, ep); got.Upstream != ep {
				t.Fatalf("the subset hint %s was not followed: %s", ep, got.Upstream)
			}
		}
	}
	f, sl := d.Store().Get(fast).Speed(), d.Store().Get(slow).Speed()
	t.Logf("learned: H100 %+v, A10G %+v", f, sl)
	if f.PrefillTokensPerSecond < 4*sl.PrefillTokensPerSecond {
		t.Fatalf("learned prefill rates H100 %.0f, A10G %.0f tok/s: not told apart", f.PrefillTokensPerSecond, sl.PrefillTokensPerSecond)
	}

	if got := chat(t, c, prompt(), "q"); got.Upstream != fast {
		t.Fatalf("idle pods: went to the A10G (%s)", got.Breakdown)
	}

	equal, stopEqual := context.WithCancel(context.Background())
	loadModel(equal, h100, "m", 5)
	loadModel(equal, a10g, "m", 5)
	waitWaiting(t, d, 3, fast, slow)
	res := schedule(t, d, prompt())
	t.Logf("equal queues: %s", res.Breakdown)
	if res.Primary != fast {
		t.Fatalf("three waiting on each: picked the A10G (%s)", res.Breakdown)
	}
	stopEqual()
	waitIdle(t, d, fast, slow)

	deep, stopDeep := context.WithCancel(context.Background())
	defer stopDeep()
	loadModel(deep, h100, "m", 52)
	waitWaiting(t, d, 50, fast)
	got := chat(t, c, prompt(), "q")
	t.Logf("H100 queued: %s", got.Breakdown)
	if got.Upstream != slow {
		t.Fatalf("H100 50 deep: went to the H100 (%s)", got.Breakdown)
	}
}

// schedule asks the picker directly (nothing is sent) and releases the pick.
func schedule(t *testing.T, d *director.Director, prompt string) *director.Result {
	t.Helper()
	res, err := d.Schedule(context.Background(), &scheduling.Request{Model: "m", Prompt: prompt}, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d.ObserveCompletion(res, 0, time.Now())
	return res
}

// waitWaiting waits until the telemetry of every endpoint shows at least n waiting.
func waitWaiting(t *testing.T, d *director.Director, n int, keys ...string) {
	t.Helper()
	waitFor(t, d, keys, func(m datastore.Metrics) bool { return m.Waiting >= n })
}

// waitIdle waits until no endpoint reports a waiting or running request.
func waitIdle(t *testing.T, d *director.Director, keys ...string) {
	t.Helper()
	waitFor(t, d, keys, func(m datastore.Metrics) bool { return m.Waiting == 0 && m.Running == 0 })
}

func waitFor(t *testing.T, d *director.Director, keys []string, ok func(datastore.Metrics) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		all := true
		var v datastore.View
		for _, k := range keys {
			d.Store().Get(k).View(time.Now(), 0, &v)
			all = all && v.HasMetrics && ok(v.Metrics)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("telemetry never reached the expected state; last %s: %+v", v.Key, v.Metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
