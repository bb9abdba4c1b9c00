package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/runner"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/tokenizer"
	"github.com/igw-dev/igw/pkg/wire"
)

// Ports every simulator publishes its KV events on (each on its own loopback
// address, as pods do on theirs), away from vLLM's defaults.
const (
	kvEventsPort = 25557
	kvReplayPort = 25558
)

// TestPreciseScorerFollowsKVEvents runs the picker (the real runner, over an
// endpoints file) against simulator processes publishing KV events over ZMQ
// on their own loopback addresses. It holds the picker's exact index to the
// simulators' own block caches, through evictions, a lost message (recovered
// through the replay socket) and a prefix-cache reset; then it kills one
// simulator and checks that the picker marks it down, scores it from the
// approximate index, says so in /readyz and its metrics, and keeps routing.
func TestPreciseScorerFollowsKVEvents(t *testing.T) {
	kvevents.RegisterTokenizer("modelsim", sim.PromptTokenizer{})
	events := fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d","topic":"kv-events"}`,
		kvEventsPort, kvReplayPort)
	// 8192 tokens of KV cache (512 blocks): the prompts below (about 1600
	// tokens each, 16 per pod) overflow it, so blocks are evicted.
	opts := simproc.Options{Config: sim.Config{GPU: "H100", Model: "llama-3.1-8b", KVCacheTokens: 8192},
		Speedup: 10, ServedModelName: "m", Extra: []string{"--kv-events-config", events, "--enable-prompt-tokens-details"}}
	a, b := opts, opts
	a.Host, b.Host = "127.0.75.1", "127.0.75.2"
	a.Extra = append(append([]string{}, a.Extra...), "--kv-events-drop", "4") // one lost message
	pa, pb := simproc.Start(t, a), simproc.Start(t, b)
	keyA, keyB := pa.Addr, pb.Addr

	cfg := fmt.Sprintf(`
plugins:
- name: precise
  type: precise-prefix-cache
  parameters: {eventsPort: %d, replayPort: %d, topic: kv-events, minMatchTokens: 64, tokenizers: {"*": modelsim},
    probeSeconds: 0.5, replayTimeoutSeconds: 1}
filters: [saturation-filter]
scorers: [{plugin: precise, weight: 1}]
`, kvEventsPort, kvReplayPort) + trustTestHeaders
	r := startRunner(t, testfile.Write(t, "", "config.yaml", cfg), testfile.Write(t, "", "endpoints.yaml", fmt.Sprintf(
		"- {address: %s, port: %d}\n- {address: %s, port: %d}\n", a.Host, pa.Port, b.Host, pb.Port)))
	hub := r.KVEvents
	servetest.WaitFor(t, "both streams exact", 10*time.Second, func() bool {
		return podState(hub, keyA) == kvevents.StateExact && podState(hub, keyB) == kvevents.StateExact
	})

	c := startGateway(t, r.Director).client()
	systems := []string{tokenizer.GenerateText(1, 1024), tokenizer.GenerateText(2, 1024), tokenizer.GenerateText(3, 1024)}
	home := []string{keyA, keyB, keyA}
	for s, sys := range systems { // place each system prompt on its pod
		chat(t, c, sys, tokenizer.GenerateText(uint64(50+s), 200), headerSubset, home[s])
	}
	for i := range 24 {
		s := i % len(systems)
		got := chat(t, c, systems[s], tokenizer.GenerateText(uint64(100+i), 500))
		// The scorer sees the system prompt on its pod, exactly, and sends the request there.
		if got.Upstream != home[s] || term(got.Breakdown, "precise") <= 0 {
			t.Errorf("request %d with system prompt %d went to %s (%s), want %s with a precise score", i, s, got.Upstream, got.Breakdown, home[s])
		}
	}
	for _, p := range []*simproc.Proc{pa, pb} {
		waitIndexMatches(t, hub, p)
	}
	stA, stB := podStatus(hub, keyA), podStatus(hub, keyB)
	if stA.Removed+stB.Removed == 0 {
		t.Errorf("no block was evicted (stored %d and %d): the test should overflow a cache", stA.Stored, stB.Stored)
	}
	if stA.Next > 4 && (stA.Gaps == 0 || stA.GapsRecovered == 0 || stA.State != kvevents.StateExact) {
		t.Errorf("pod A's dropped batch 4: %d gaps, %d recovered, state %s (%s)", stA.Gaps, stA.GapsRecovered, stA.State, stA.Reason)
	}
	if stA.Next <= 4 {
		t.Errorf("pod A published only %d batches: the dropped one never came", stA.Next)
	}

	t.Logf("pod A: %+v\npod B: %+v", stA, stB)

	// A prefix-cache reset empties the pod's blocks in the index too.
	resp, err := http.Post(pa.URL+"/reset_prefix_cache", "", nil)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reset_prefix_cache: %s", resp.Status)
	}
	waitIndexMatches(t, hub, pa)
	if n := hub.Index().Holds(keyA); n != 0 || podStatus(hub, keyA).Cleared == 0 {
		t.Fatalf("after the reset the index holds %d of pod A's blocks", n)
	}

	// A killed publisher: down, visibly, and scored approximately.
	pb.Stop()
	servetest.WaitFor(t, "pod B down", 10*time.Second, func() bool { return podState(hub, keyB) == kvevents.StateDown })
	metrics := string(servetest.Get(t, "http://"+r.Addr("metrics")+"/metrics").Body)
	for _, want := range []string{
		fmt.Sprintf(`%s{endpoint=%q,state="down"} 1`, wire.EPPKVEventsStreamState, keyB),
		fmt.Sprintf(`%s{endpoint=%q,state="exact"} 1`, wire.EPPKVEventsStreamState, keyA),
		fmt.Sprintf(`%s{endpoint=%q,outcome="recovered"}`, wire.EPPKVEventsGaps, keyA),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var ready struct {
		Ready  bool
		Detail struct {
			KVEvents struct {
				Summary string
				Pods    map[string]string
			}
		}
	}
	must(t, json.Unmarshal(servetest.Get(t, "http://"+r.Addr("metrics")+"/readyz").Body, &ready))
	if !ready.Ready || !strings.Contains(ready.Detail.KVEvents.Summary, "approximate prefix index for "+keyB) ||
		!strings.HasPrefix(ready.Detail.KVEvents.Pods[keyB], "down") {
		t.Errorf("/readyz: ready %v, kvEvents %+v", ready.Ready, ready.Detail.KVEvents)
	}
	// Requests still go through, to the live pod (once telemetry calls B stale).
	servetest.WaitFor(t, "pod B's telemetry stale", 10*time.Second, func() bool {
		var v datastore.View
		r.Store.Get(keyB).View(time.Now(), r.Options.MetricsStaleness, &v)
		return v.Stale
	})
	for i := range 3 {
		if got := chat(t, c, systems[i], "after the loss"); got.Upstream != keyA {
			t.Errorf("request after pod B died went to %s", got.Upstream)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func podStatus(h *kvevents.Hub, pod string) kvevents.PodStatus {
	for _, s := range h.Status() {
		if s.Pod == pod {
			return s
		}
	}
	return kvevents.PodStatus{}
}

func podState(h *kvevents.Hub, pod string) kvevents.State { return podStatus(h, pod).State }

// waitIndexMatches waits until the picker has applied every batch the
// simulator published and holds exactly the simulator's cached blocks.
func waitIndexMatches(t *testing.T, h *kvevents.Hub, p *simproc.Proc) {
	t.Helper()
	var simBlocks struct {
		BlockHashes  []uint64 `json:"block_hashes"`
		NextSequence uint64   `json:"next_sequence"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		must(t, json.Unmarshal(servetest.Get(t, p.URL+"/debug/kv_blocks").Body, &simBlocks))
		st := podStatus(h, p.Addr)
		index := h.Index().EngineHashes(p.Addr)
		same := st.Next == simBlocks.NextSequence && len(index) == len(simBlocks.BlockHashes)
		for _, hsh := range simBlocks.BlockHashes {
			same = same && index[hsh] == 1
		}
		if same && st.State == kvevents.StateExact {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the index holds %d blocks at sequence %d (%s: %s), the simulator %d at %d",
				p.Addr, len(index), st.Next, st.State, st.Reason, len(simBlocks.BlockHashes), simBlocks.NextSequence)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startRunner runs the picker process's runner in-process over the files.
func startRunner(t *testing.T, configFile, endpointsFile string) *runner.Runner {
	t.Helper()
	o := options.New()
	o.GRPCPort, o.HealthPort, o.MetricsPort, o.BindAddress = 0, 0, 0, "127.0.0.1"
	o.ConfigFile, o.EndpointsFile = configFile, endpointsFile
	r := servetest.Build(t, o, runner.New)
	stop := servetest.Start(t, "the picker", r.Run)
	t.Cleanup(func() { _ = stop() })
	return r
}
