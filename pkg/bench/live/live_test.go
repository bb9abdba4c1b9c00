package live

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/des"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
	"github.com/igw-dev/igw/pkg/sim"
)

// testSpeedup keeps runs to a couple of wall seconds. Nothing below depends
// on timing: a busy machine makes requests late, never different.
const testSpeedup = 4

func runLive(t *testing.T, sc *scenario.Scenario, policy string) bench.Outcome {
	t.Helper()
	o, err := bench.RunJobs(context.Background(), &Backend{Speedup: testSpeedup, Log: testLog{t}},
		[]bench.Job{{Scenario: sc, Policy: policy, Seed: 1}}, bench.RunOptions{KeepTraces: true})
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return o[0]
}

// testLog sends the processes' stderr of a failed run to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

// Every policy that runs live serves the whole workload through the gateway:
// each request reaches a pod, streams exactly the output the workload asked
// for, and its prompt is tokenized by the server as the workload counted it
// (the des backend, on the same seed, is the reference).
func TestEveryLivePolicyServesTheWorkload(t *testing.T) {
	sc := scenariotest.Load(t, "testdata/tiny.yaml")
	for _, policy := range policies.Names {
		if policy == policies.Oracle {
			continue
		}
		t.Run(policy, func(t *testing.T) {
			o := runLive(t, sc, policy)
			ref, err := bench.RunJobs(context.Background(), des.Backend{}, []bench.Job{o.Job}, bench.RunOptions{KeepTraces: true})
			if err != nil {
				t.Fatal(err)
			}
			want := map[uint64]bench.Record{}
			for _, r := range ref[0].Trace.Records {
				want[r.ID] = r
			}
			recs := o.Trace.Records
			if len(recs) != len(want) {
				t.Fatalf("%d requests sent, the workload has %d", len(recs), len(want))
			}
			for _, r := range recs {
				w, ok := want[r.ID]
				switch {
				case !ok:
					t.Fatalf("request %d is not in the workload", r.ID)
				case !r.Done || r.Failed:
					t.Fatalf("request %d did not complete: %+v", r.ID, r)
				case r.Pod < 0 || r.Pod >= 2:
					t.Fatalf("request %d: pod %d, the fleet has 2", r.ID, r.Pod)
				case r.OutputTokens != w.OutputTokens || r.PromptTokens != w.PromptTokens:
					t.Fatalf("request %d: %d prompt and %d output tokens, the workload has %d and %d",
						r.ID, r.PromptTokens, r.OutputTokens, w.PromptTokens, w.OutputTokens)
				case r.CachedTokens > r.PromptTokens:
					t.Fatalf("request %d: %d cached tokens of a %d-token prompt", r.ID, r.CachedTokens, r.PromptTokens)
				case !(r.Arrival < r.FirstToken && r.FirstToken <= r.Finish):
					t.Fatalf("request %d: arrival %v, first token %v, finish %v", r.ID, r.Arrival, r.FirstToken, r.Finish)
				}
			}
			m := o.Metrics
			if m.Failed != 0 || m.Completed != ref[0].Metrics.Completed || m.OutputTokPerS <= 0 || m.TTFTP50 <= 0 {
				t.Errorf("metrics %+v; des completed %v", m, ref[0].Metrics.Completed)
			}
		})
	}
}

// The servers' own counters arrive: prefix-cache queries and hits (users
// share system prompts) and adapter loads (three adapters, one slot per pod),
// counted from the end of the warmup.
func TestFleetCountersComeFromTheServers(t *testing.T) {
	o := runLive(t, scenariotest.Load(t, "testdata/tiny.yaml"), policies.RoundRobin)
	f := o.Trace.Fleet
	if f.PrefixQueries == 0 || f.PrefixHits == 0 || f.PrefixHits > f.PrefixQueries {
		t.Errorf("prefix cache: %d hits of %d queried tokens", f.PrefixHits, f.PrefixQueries)
	}
	if f.LoRALoads == 0 {
		t.Error("no adapter loads counted, though three adapters share one slot per pod")
	}
	var prompt uint64
	for _, r := range o.Trace.Records {
		prompt += uint64(r.PromptTokens)
	}
	if f.PrefixQueries > prompt {
		t.Errorf("%d prompt tokens queried after the warmup, more than all %d prompt tokens sent", f.PrefixQueries, prompt)
	}
	if o.Metrics.PrefixHitRate <= 0 || o.Metrics.LoRALoads != float64(f.LoRALoads) {
		t.Errorf("metrics %+v from counters %+v", o.Metrics, f)
	}
	// Round-robin alternates over the pods whatever the timing.
	count := [2]int{}
	for _, r := range o.Trace.Records {
		count[r.Pod]++
	}
	if d := count[0] - count[1]; d < -1 || d > 1 {
		t.Errorf("round-robin sent %v requests to the two pods", count)
	}
}

func TestOracleIsNotRunLive(t *testing.T) {
	b := &Backend{BinDir: t.TempDir()} // nothing to start: the refusal comes first
	if err := b.SupportsPolicy(policies.Oracle); !errors.Is(err, ErrOracleNotLive) || !strings.Contains(err.Error(), "--mode des") {
		t.Fatalf("SupportsPolicy(oracle) = %v", err)
	}
	for _, p := range policies.Names {
		if err := b.SupportsPolicy(p); (err == nil) == (p == policies.Oracle) {
			t.Errorf("SupportsPolicy(%s) = %v", p, err)
		}
	}
	_, err := bench.RunJob(context.Background(), b, bench.Job{Scenario: scenariotest.Load(t, "testdata/tiny.yaml"), Policy: policies.Oracle, Seed: 1}, nil)
	if !errors.Is(err, ErrOracleNotLive) {
		t.Fatalf("running the oracle live: %v", err)
	}
}

func TestMissingBinaryIsNamed(t *testing.T) {
	dir := t.TempDir()
	_, err := bench.RunJob(context.Background(), &Backend{BinDir: dir}, bench.Job{Scenario: scenariotest.Load(t, "testdata/tiny.yaml"), Policy: policies.IGW, Seed: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "no executable modelsim in "+dir) || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("err = %v", err)
	}
}

// A gateway that cannot start fails the run with what it said, and the
// simulators started before it do not outlive the run.
func TestGatewayFailureIsReported(t *testing.T) {
	bins, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bins.modelsim, filepath.Join(dir, "modelsim")); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'gateway: broken on purpose' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, gatewayCommand), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	job := bench.Job{Scenario: scenariotest.Load(t, "testdata/tiny.yaml"), Policy: policies.IGW, Seed: 1}
	f, err := startFleet(context.Background(), job, testSpeedup, binaries{modelsim: filepath.Join(dir, "modelsim"), gateway: filepath.Join(dir, gatewayCommand)}, "")
	if f == nil {
		t.Fatalf("no fleet to stop: %v", err)
	}
	f.stop()
	if err == nil || !strings.Contains(err.Error(), gatewayCommand+" exited") || !strings.Contains(err.Error(), "broken on purpose") {
		t.Fatalf("err = %v", err)
	}
	for _, p := range f.pods {
		if !p.Exited() {
			t.Errorf("%s still runs after the fleet stopped", p.Name)
		}
	}
}

// Backend.IGWConfig reaches the igw pool of the gateway: a configuration the
// picker rejects stops the gateway at start, naming the fault; other policies
// do not read it.
func TestIGWConfigReachesTheGateway(t *testing.T) {
	bins, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	const broken = "scorers: [{plugin: no-such-scorer, weight: 1}]\n"
	for _, policy := range []string{policies.IGW, policies.RoundRobin} {
		f, err := startFleet(context.Background(), bench.Job{Scenario: scenariotest.Load(t, "testdata/tiny.yaml"), Policy: policy, Seed: 1}, testSpeedup, bins, broken)
		if f != nil {
			f.stop()
		}
		if failed := err != nil && strings.Contains(err.Error(), "no-such-scorer"); failed != (policy == policies.IGW) {
			t.Errorf("%s with a broken igw configuration: %v", policy, err)
		}
	}
}

// The simulator runs exactly the pod the scenario describes: every fleet key
// reaches it through its flags.
func TestSimArgsCarryEveryFleetKey(t *testing.T) {
	cfgs := []sim.Config{
		{GPU: "A100", Model: "qwen3-32b", TensorParallel: 2, MaxNumSeqs: 77, MaxNumBatchedTokens: 4096, KVCacheTokens: 50_000,
			MaxLoras: 3, LoRALoadTime: 123_000_000, SpeedJitter: 0.07, Seed: 42},
		{GPU: "H100", Model: "llama-3.1-8b", Seed: 7}, // defaults, no LoRA
	}
	for _, cfg := range cfgs {
		args := simArgs("127.0.0.1", cfg, 2.5, []string{"a", "b"})
		opts := sim.DefaultOptions()
		fs := flag.NewFlagSet("modelsim", flag.ContinueOnError)
		opts.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		got, err := opts.EngineConfig()
		if err != nil {
			t.Fatal(err)
		}
		if want := cfg.WithDefaults(); got != want {
			t.Errorf("simulator runs %+v, the scenario says %+v", got, want)
		}
		if opts.Speedup != 2.5 || !opts.EnablePromptTokensDetails {
			t.Errorf("speedup %v, prompt token details %v", opts.Speedup, opts.EnablePromptTokensDetails)
		}
		var adapters []string
		for _, m := range opts.LoRAModules {
			adapters = append(adapters, m.Name)
		}
		if want := []string{"a", "b"}; cfg.MaxLoras > 0 != slices.Equal(adapters, want) {
			t.Errorf("max loras %d, adapters registered %v", cfg.MaxLoras, adapters)
		}
	}
}

func TestAutoSpeedup(t *testing.T) {
	small := scenariotest.Load(t, "testdata/tiny.yaml")
	if k := AutoSpeedup(small); k != 1 {
		t.Errorf("a light scenario runs at %v× real time, want real time", k)
	}
	heavy := scenariotest.Load(t, "../../../bench/scenarios/mixed-gpu.yaml")
	k := AutoSpeedup(heavy)
	if k >= 1 || k < slowest || k*20 != float64(int(k*20)) {
		t.Errorf("mixed-gpu (30 req/s of ~180 tokens) runs at %v× real time", k)
	}
	if tokens := 30 * meanCount(heavy.Workload.Output); tokens*k > tokenBudget {
		t.Errorf("%v× streams %.0f tokens/s, over the budget of %v", k, tokens*k, tokenBudget)
	}
}
