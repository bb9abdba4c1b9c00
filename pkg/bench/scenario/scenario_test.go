package scenario

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The README's example shows every key of the schema at once.
const everyKey = `
name: mixed-gpu
duration: 600s
warmup: 60s
scrapeInterval: 100ms
fleet:
  - name: h100
    replicas: 4
    gpu: H100
    model: llama-3.1-8b
    tensorParallel: 1
    maxNumSeqs: 256
    maxNumBatchedTokens: 8192
    kvCacheTokens: auto
    maxLoras: 4
    loraLoadTime: 50ms
    speedJitter: 0.05
  - {name: a10g, replicas: 2, gpu: A10G, model: llama-3.1-8b, kvCacheTokens: 30000, maxLoras: 2}
workload:
  arrival:
    type: onoff
    rate: 20
    cv: 1
    on: 20s
    off: 40s
  stages:
    - {rate: 5, duration: 120s}
    - {rate: 40, duration: 60s}
  input:  {dist: lognormal, median: 1000, sigma: 1.0, min: 16, max: 32000}
  output: {dist: normal, mean: 130, stddev: 20, min: 1, max: 4000}
  sharedPrefix:
    groups: 150
    usersPerGroup: 5
    systemPromptTokens: 6000
  multiTurn:
    turns: 5
    thinkTime: {dist: fixed, value: 5s}
  lora:
    adapters: 15
    fraction: 0.8
    popularity: {dist: zipf, s: 1.1}
slo: {ttft: 2s, tpot: 100ms}
kvEventDelay: 20ms
`

func TestParseEveryKey(t *testing.T) {
	s, err := Parse([]byte(everyKey), "every.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "mixed-gpu" || s.Duration != 600*time.Second || s.Warmup != time.Minute || s.ScrapeInterval != 100*time.Millisecond ||
		s.KVEventDelay != 20*time.Millisecond {
		t.Errorf("top level: %+v", s)
	}
	h := s.Fleet[0]
	if h.Replicas != 4 || h.GPU != "H100" || h.TensorParallel != 1 || h.MaxNumSeqs != 256 || h.MaxNumBatchedTokens != 8192 ||
		h.KVCacheTokens != 0 || h.MaxLoras != 4 || h.LoRALoadTime != 50*time.Millisecond || h.SpeedJitter != 0.05 {
		t.Errorf("fleet[0]: %+v", h)
	}
	if s.Fleet[1].KVCacheTokens != 30000 {
		t.Errorf("kvCacheTokens: %d", s.Fleet[1].KVCacheTokens)
	}
	w := s.Workload
	if w.Arrival != (Arrival{Type: "onoff", Rate: 20, CV: 1, On: 20 * time.Second, Off: 40 * time.Second}) {
		t.Errorf("arrival: %+v", w.Arrival)
	}
	if len(w.Stages) != 2 || w.Stages[1] != (Stage{Rate: 40, Duration: time.Minute}) {
		t.Errorf("stages: %+v", w.Stages)
	}
	if w.Input.Dist != "lognormal" || w.Input.Median != Q(1000) || w.Input.Sigma != 1 || w.Input.Min != Q(16) || w.Input.Max != Q(32000) {
		t.Errorf("input: %+v", w.Input)
	}
	if w.Output.Mean != Q(130) || w.Output.Stddev != Q(20) {
		t.Errorf("output: %+v", w.Output)
	}
	if *w.SharedPrefix != (SharedPrefix{Groups: 150, UsersPerGroup: 5, SystemPromptTokens: 6000}) {
		t.Errorf("sharedPrefix: %+v", w.SharedPrefix)
	}
	if w.MultiTurn.Turns != 5 || w.MultiTurn.ThinkTime.Value != Q(5) {
		t.Errorf("multiTurn: %+v", w.MultiTurn)
	}
	if *w.LoRA != (LoRA{Adapters: 15, Fraction: 0.8, Popularity: Popularity{Dist: "zipf", S: 1.1}}) {
		t.Errorf("lora: %+v", w.LoRA)
	}
	if s.SLO != (SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}) {
		t.Errorf("slo: %+v", s.SLO)
	}
	if got := len(s.PodConfigs(1)); got != 6 {
		t.Errorf("pods: %d", got)
	}
	if s.MaxContext() != 30000 {
		t.Errorf("max context %d, want the A10G's 30000-token cache", s.MaxContext())
	}
}

func TestScrapeIntervalDefault(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(everyKey, "scrapeInterval: 100ms\n", "", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.ScrapeInterval != 50*time.Millisecond {
		t.Fatalf("default scrape interval %v", s.ScrapeInterval)
	}
}

func TestKVEventDelayDefault(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(everyKey, "kvEventDelay: 20ms\n", "", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.KVEventDelay != DefaultKVEventDelay {
		t.Fatalf("default KV event delay %v", s.KVEventDelay)
	}
}

func TestUnknownKeyNamesKeyFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, key string
		line            int
	}{
		{"top", "name: x\ndurration: 5s\n", "durration", 2},
		{"fleet", "name: x\nfleet:\n  - name: a\n    replicas: 1\n    gpus: H100\n", "gpus", 5},
		{"nested flow", "name: x\nworkload:\n  input: {dist: fixed, valu: 3}\n", "valu", 3},
		{"lora popularity", "name: x\nworkload:\n  lora:\n    popularity: {dist: zipf, s: 1, q: 2}\n", "q", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "bad.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			want := "bad.yaml:" + strconv.Itoa(tc.line) + ": unknown key \"" + tc.key + "\""
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not contain %q", err, want)
			}
		})
	}
}

// The unknown-key error lists the keys known where it stands; every error of
// the file is reported at once.
func TestUnknownKeyListsKnownKeysAndAllErrorsAtOnce(t *testing.T) {
	bad := strings.Replace(strings.Replace(everyKey, "warmup:", "warmpu:", 1), "usersPerGroup:", "users:", 1)
	_, err := Parse([]byte(bad), "bad.yaml")
	for _, want := range []string{
		`bad.yaml:4: unknown key "warmpu" in the top level (known: name, duration, warmup, scrapeInterval, kvEventDelay, fleet, clusters, network, workload, slo, faults, outages)`,
		`bad.yaml:33: unknown key "users" in workload.sharedPrefix (known: groups, usersPerGroup, systemPromptTokens, fixedQuestions)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
	_, err = Parse([]byte("name: x\nworkload:\n  output: {dist: fixed, valu: 3}\n"), "bad.yaml")
	if want := `in workload.input or workload.output or workload.multiTurn.thinkTime (known: dist, median, sigma, value, mean, stddev, min, max)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v does not contain %q", err, want)
	}
}

// A bare 0 is a duration; numbers that are not finite are refused wherever
// they would pass the range checks.
func TestZeroDurationsAndNonFiniteNumbers(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(everyKey, "off: 40s", "off: 0", 1)), "x.yaml")
	if err != nil || s.Workload.Arrival.Off != 0 {
		t.Fatalf("off: 0 read as %v, error %v", s.Workload.Arrival.Off, err)
	}
	// Beside a bare 0, other errors are still reported.
	zeroAndFraction := strings.Replace(strings.Replace(everyKey, "off: 40s", "off: 0", 1), "replicas: 4", "replicas: 4.5", 1)
	if _, err := Parse([]byte(zeroAndFraction), "bad.yaml"); err == nil || !strings.Contains(err.Error(), `bad.yaml:8: want an integer, got "4.5"`) {
		t.Errorf("fraction beside a bare 0: error %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"speedJitter: 0.05", "speedJitter: .nan", "speedJitter must be in [0, 1)"},
		{"cv: 1", "cv: .inf", "arrival.cv must not be negative"},
		{"type: onoff", "type: gamma", ""}, // control: a finite cv passes
		{"output: {dist: normal, mean: 130, stddev: 20,", "output: {dist: normal, mean: 130, sigma: .inf,", "stddev must not be negative"},
		{"median: 1000", "median: .nan", "bad.yaml:29: want a number or a duration"},
		{"warmup: 60s", "warmup: 60", `bad.yaml:4: want a duration such as 300s or 50ms, got "60"`},
		{"fleet:\n", "fleet: {}\nx:\n", "bad.yaml:6: want a list, got a mapping"},
		{"replicas: 4", "replicas: four", `bad.yaml:8: want an integer, got "four"`},
		{"replicas: 4", "replicas: 4.5", `bad.yaml:8: want an integer, got "4.5"`},
		{"turns: 5", "turns: 5.0", ""}, // a whole number written as a float
		{"turns: 5", "turns: 1.5e0", `bad.yaml:36: want an integer, got "1.5e0"`},
		{"rate: 20", "rate: 20\n    rate: 30", `bad.yaml:23: key "rate" appears twice (first at line 22)`},
	} {
		bad := strings.Replace(everyKey, tc.from, tc.to, 1)
		if bad == everyKey {
			t.Fatalf("edit %q not applied", tc.from)
		}
		_, err := Parse([]byte(bad), "bad.yaml")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.to, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
}

func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"arrival type", "type: onoff", "type: burst", "arrival.type must be one of"},
		{"bad duration", "on: 20s", "on: 20 seconds", "want a duration"},
		{"bad gpu", "gpu: H100\n", "gpu: B300\n", "GPU"},
		{"dist", "dist: lognormal, median", "dist: pareto, median", "dist must be one of"},
		{"kv tokens", "kvCacheTokens: auto", "kvCacheTokens: lots", "want auto or a positive number"},
		{"duplicate key", "rate: 20", "rate: 20\n    rate: 30", "appears twice"},
		{"negative event delay", "kvEventDelay: 20ms", "kvEventDelay: -5ms", "kvEventDelay must be in (0, 1m], got -5ms"},
		{"event delay too long", "kvEventDelay: 20ms", "kvEventDelay: 2m", "kvEventDelay must be in (0, 1m], got 2m0s"},
		{"mixed models", "model: llama-3.1-8b, kvCache", "model: qwen3-32b, kvCache", "a scenario serves one model"},
		{"fixed questions in a conversation", "systemPromptTokens: 6000", "systemPromptTokens: 6000\n    fixedQuestions: true", "fixedQuestions cannot be combined with multiTurn"},
		{"too many fixed-question users", "groups: 150", "groups: 300000\n    fixedQuestions: true", "fixedQuestions takes at most 1000000 users"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectError(t, everyKey, tc.from, tc.to, tc.want) })
	}
}

// expectError parses good with its first from replaced by to and wants an
// error containing want.
func expectError(t *testing.T, good, from, to, want string) {
	t.Helper()
	bad := strings.Replace(good, from, to, 1)
	if bad == good {
		t.Fatalf("edit %q not applied", from)
	}
	_, err := Parse([]byte(bad), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// eachScenario loads every scenario file that pattern matches (at least
// least of them) and hands each that loads to check.
func eachScenario(t *testing.T, pattern string, least int, check func(file string, s *Scenario)) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) < least {
		t.Fatalf("%s: %v %v", pattern, files, err)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		check(f, s)
	}
}

// The held-out scenarios (bench/heldout) are their public namesakes' fleet
// and SLO on a later window of the same trace, holding requests: a check on
// shapes nothing was tuned on, not a different benchmark.
func TestHeldOutAreLaterWindowsOfThePublicTraces(t *testing.T) {
	eachScenario(t, "../../../bench/heldout/*.yaml", 1, func(f string, held *Scenario) {
		public, err := Load(filepath.Join("../../../bench/scenarios", strings.SplitN(held.Name, "-from-", 2)[0]+".yaml"))
		if err != nil {
			t.Errorf("%s: no public namesake: %v", f, err)
			return
		}
		ht, pt := held.Workload.Trace, public.Workload.Trace
		switch {
		case ht == nil || pt == nil || ht.Start <= pt.Start || filepath.Base(ht.File) != filepath.Base(pt.File):
			t.Errorf("%s: not a later window of %s's trace", f, public.Name)
		case len(ht.Records) < len(pt.Records)/2:
			t.Errorf("%s: %d requests in the window, against %d in the public one", f, len(ht.Records), len(pt.Records))
		case !reflect.DeepEqual(held.Fleet, public.Fleet) || held.SLO != public.SLO || held.Warmup != public.Warmup:
			t.Errorf("%s: fleet, SLO or warmup differ from %s's", f, public.Name)
		}
	})
}

// The unseen shapes (bench/shapes) are synthetic loads, none a trace: a
// check of routing on fleets and loads the grid does not have.
func TestUnseenShapesLoad(t *testing.T) {
	eachScenario(t, "../../../bench/shapes/*.yaml", 5, func(f string, s *Scenario) {
		if s.Workload.Trace != nil || len(s.Fleet) == 0 || s.SLO.TTFT <= 0 || s.SLO.TPOT <= 0 {
			t.Errorf("%s: a trace, no fleet or no SLO", f)
		}
	})
}

func TestPublicGridLoads(t *testing.T) {
	eachScenario(t, "../../../bench/scenarios/*.yaml", 6, func(f string, s *Scenario) {
		if s.ScrapeInterval != DefaultScrapeInterval || s.MaxContext() <= 0 {
			t.Errorf("%s: scrape %v, max context %d", f, s.ScrapeInterval, s.MaxContext())
		}
	})
}
