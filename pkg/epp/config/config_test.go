package config

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
)

const full = `
plugins:
- name: prefix
  type: prefix-cache
  parameters: {minMatchTokens: 256}
- name: h100-only
  type: label-selector-filter
  parameters:
    matchLabels: {gpu: h100}
filters: [h100-only, saturation-filter]
scorers:
- {plugin: predicted-latency, weight: 1}
- {plugin: prefix, weight: 0.5}
- {plugin: queue, weight: 0}
picker: weighted-random-picker
fallbacks: 3
prefix: {blockTokens: 64, maxBlocks: 128}
latency: {chunkTokens: 2048, kvPressureThreshold: 0.8, kvPressureFactor: 2}
admission: {queueDepth: 10, shedBelowPriority: 1, maxWaitSeconds: 2, maxInterTokenSeconds: 0,
  queue: {maxRequests: 64, maxBytes: 1048576, maxWaitSeconds: 0.5}, lateBinding: {startWithinChunks: 2, maxRequests: 32}}
baseModels: [llama]
`

func TestBuildFull(t *testing.T) {
	p, err := Load([]byte(full), plugins.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	pr := p.Profile
	if len(pr.Filters) != 2 || pr.Filters[0].Name() != "h100-only" || pr.Filters[1].Type() != "saturation-filter" {
		t.Fatalf("filters %v", pr.Filters)
	}
	if len(pr.Scorers) != 3 || pr.Scorers[1].Scorer.Name() != "prefix" || pr.Scorers[1].Weight != 0.5 {
		t.Fatalf("scorers %+v", pr.Scorers)
	}
	if pr.Picker.Type() != "weighted-random-picker" || pr.Fallbacks != 3 {
		t.Fatalf("picker %s fallbacks %d", pr.Picker.Type(), pr.Fallbacks)
	}
	if p.BlockTokens != 64 || p.MaxPrefixBlocks != 128 || p.PrefixCacheShare != 0 || p.Latency.ChunkTokens != 2048 || p.Latency.KVPressureFactor != 2 {
		t.Fatalf("pipeline %+v: a maxBlocks set is the bound, whatever the servers' caches", p)
	}
	if !p.Admission.Enabled || p.Admission.QueueDepth != 10 || p.Admission.ShedBelowPriority != 1 || p.Admission.KVCacheUtilization != 0.8 ||
		p.Admission.MaxWaitSeconds != 2 || p.Admission.MaxInterTokenSeconds != 0 ||
		p.Admission.Queue != (admission.QueueBounds{Room: admission.Room{MaxRequests: 64, MaxBytes: 1 << 20}, MaxWaitSeconds: 0.5}) {
		t.Fatalf("admission %+v", p.Admission)
	}
	if len(p.BaseModels) != 1 {
		t.Fatal("baseModels lost")
	}
	if want := (admission.LateBinding{StartWithinChunks: 2, Room: admission.Room{MaxRequests: 32, MaxBytes: admission.DefaultLateBinding.MaxBytes}}); p.Admission.LateBinding != want {
		t.Fatalf("late binding %+v, want %+v", p.Admission.LateBinding, want)
	}
}

func TestDefaultBuilds(t *testing.T) {
	p, err := Load([]byte(Default), plugins.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile.Scorers[0].Scorer.Type() != "predicted-latency" || p.Profile.Picker.Type() != "max-score-picker" || p.Profile.Fallbacks != DefaultFallbacks {
		t.Fatalf("default %+v", p.Profile)
	}
	if len(p.Profile.Filters) != 1 || p.Profile.Filters[0].Type() != "model-served-filter" {
		t.Fatalf("default filters %v: an adapter's requests must avoid servers that do not list it", p.Profile.Filters)
	}
	if p.MaxPrefixBlocks != DefaultMaxPrefixBlocks || p.PrefixCacheShare != DefaultPrefixCacheShare {
		t.Fatalf("default prefix keying %d blocks, share %v", p.MaxPrefixBlocks, p.PrefixCacheShare)
	}
}

func TestRejects(t *testing.T) {
	for name, yaml := range map[string]string{
		"empty":             "",
		"unknown field":     "scorerz: []",
		"no scorers":        "picker: max-score-picker",
		"unknown plugin":    "scorers: [{plugin: nope, weight: 1}]",
		"negative weight":   "scorers: [{plugin: queue, weight: -1}]",
		"filter as scorer":  "scorers: [{plugin: saturation-filter, weight: 1}]",
		"scorer as picker":  "scorers: [{plugin: queue, weight: 1}]\npicker: queue",
		"scorer as filter":  "filters: [queue]\nscorers: [{plugin: queue, weight: 1}]",
		"duplicate name":    "plugins: [{type: queue}, {type: queue}]\nscorers: [{plugin: queue, weight: 1}]",
		"bad parameter":     "plugins: [{type: prefix-cache, parameters: {minMatch: 3}}]\nscorers: [{plugin: prefix-cache, weight: 1}]",
		"missing type":      "plugins: [{name: x}]\nscorers: [{plugin: x, weight: 1}]",
		"fallbacks":         "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 99",
		"kv threshold":      "scorers: [{plugin: queue, weight: 1}]\nlatency: {kvPressureThreshold: 2}",
		"admission":         "scorers: [{plugin: queue, weight: 1}]\nadmission: {kvCacheUtilization: 1.5}",
		"admission wait":    "scorers: [{plugin: queue, weight: 1}]\nadmission: {maxWaitSeconds: -1}",
		"admission slo":     "scorers: [{plugin: queue, weight: 1}]\nadmission: {slo: {ttftSeconds: 2, tpotSeconds: 0}}",
		"miss budget":       "scorers: [{plugin: queue, weight: 1}]\nadmission: {missBudget: 0.02}",
		"negative budget":   "scorers: [{plugin: queue, weight: 1}]\nadmission: {missBudget: -0.001}",
		"queue requests":    "scorers: [{plugin: queue, weight: 1}]\nadmission: {queue: {maxRequests: -1}}",
		"queue bytes":       "scorers: [{plugin: queue, weight: 1}]\nadmission: {queue: {maxRequests: 8, maxBytes: 0}}",
		"queue wait":        "scorers: [{plugin: queue, weight: 1}]\nadmission: {queue: {maxWaitSeconds: -0.5}}",
		"late binding":      "scorers: [{plugin: queue, weight: 1}]\nadmission: {lateBinding: {startWithinChunks: -1}}",
		"late binding room": "scorers: [{plugin: queue, weight: 1}]\nadmission: {lateBinding: {startWithinChunks: 2, maxRequests: 0}}",
		"not yaml":          "scorers: [",
		"wrong type":        "scorers: {plugin: queue}",
		"negative block":    "scorers: [{plugin: queue, weight: 1}]\nprefix: {blockTokens: -1}",
	} {
		if _, err := Load([]byte(yaml), plugins.NewRegistry()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWatcherKeepsLastGood(t *testing.T) {
	// A ConfigMap volume: the file is a symlink through ..data, swapped atomically.
	volume := testfile.NewConfigMap(t, map[string]string{"config.yaml": "scorers: [{plugin: queue, weight: 1}]"})
	write := func(content string) { volume.Update(map[string]string{"config.yaml": content}) }
	var applied []*director.Pipeline
	var failures int
	var logs bytes.Buffer
	w := &Watcher{Path: volume.Path("config.yaml"), Registry: plugins.NewRegistry(),
		Apply: func(p *director.Pipeline) { applied = append(applied, p) },
		OnLoad: func(err error, _ time.Time) {
			if err != nil {
				failures++
			}
		},
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := w.Load(); err != nil || len(applied) != 1 || applied[0].Profile.Scorers[0].Scorer.Type() != "queue" {
		t.Fatalf("initial load: %v %d", err, len(applied))
	}
	if err := w.Load(); err != nil || len(applied) != 1 {
		t.Fatal("unchanged file re-applied")
	}
	write("scorers: [{plugin: queue, weight: -5}]")
	if err := w.Load(); err == nil || len(applied) != 1 || failures != 1 {
		t.Fatalf("invalid file applied (%d) or not reported (%d)", len(applied), failures)
	}
	st := w.Status()
	if !st.Loaded || !strings.Contains(st.Error, "weight") || st.Digest == "" {
		t.Fatalf("status after rejection %+v", st)
	}
	if !strings.Contains(logs.String(), "keeping the last good one") {
		t.Fatalf("no log line: %s", logs.String())
	}
	write("scorers: [{plugin: running-requests, weight: 1}]")
	if err := w.Load(); err != nil || len(applied) != 2 || applied[1].Profile.Scorers[0].Scorer.Type() != "running-requests" {
		t.Fatalf("fixed file: %v %d", err, len(applied))
	}
	if st := w.Status(); st.Error != "" {
		t.Fatalf("error kept after a good load: %+v", st)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(Default))
	f.Add([]byte("plugins: [{type: lora-affinity, parameters: {resident: 2}}]\nscorers: [{plugin: lora-affinity, weight: 1}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(data, plugins.NewRegistry())
		if err != nil {
			return
		}
		if p.Profile == nil || p.Profile.Picker == nil || len(p.Profile.Scorers) == 0 || p.Profile.Fallbacks < 0 {
			t.Fatalf("accepted an unusable pipeline: %+v", p.Profile)
		}
		for _, s := range p.Profile.Scorers {
			if !(s.Weight >= 0) {
				t.Fatalf("weight %v", s.Weight)
			}
		}
	})
}

// The overload bounds follow the route's SLO unless set themselves, and the
// route's SLO joins a configuration that names none.
func TestAdmissionBoundsFollowTheRouteSLO(t *testing.T) {
	load := func(text string) admission.Policy {
		t.Helper()
		p, err := Load([]byte(text), plugins.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return p.Admission
	}
	if a := load(Default); a.MaxWaitSeconds != 1.5 || math.Abs(a.MaxInterTokenSeconds-0.065) > 1e-9 {
		t.Errorf("default bounds %v s, %v s: want those of a 2 s / 100 ms SLO", a.MaxWaitSeconds, a.MaxInterTokenSeconds)
	}
	if a := load(Default + "admission: {slo: {ttftSeconds: 4, tpotSeconds: 0.2}}"); a.MaxWaitSeconds != 3 || math.Abs(a.MaxInterTokenSeconds-0.13) > 1e-9 || a.TPOTSeconds != 0.2 {
		t.Errorf("bounds for 4 s / 200 ms: %v s, %v s, fitted to %v s a token", a.MaxWaitSeconds, a.MaxInterTokenSeconds, a.TPOTSeconds)
	}
	// A bound between tokens set as is is not moved by the streams' spread.
	if a := load(Default + "admission: {slo: {ttftSeconds: 4, tpotSeconds: 0.2}, maxInterTokenSeconds: 0.1}"); a.MaxInterTokenSeconds != 0.1 || a.TPOTSeconds != 0 {
		t.Errorf("explicit bound between tokens: %v s, fitted to %v s a token; want 0.1 s, none", a.MaxInterTokenSeconds, a.TPOTSeconds)
	}
	if a := load(Default + "admission: {slo: {ttftSeconds: 4, tpotSeconds: 0.2}, maxWaitSeconds: 0}"); a.MaxWaitSeconds != 0 || math.Abs(a.MaxInterTokenSeconds-0.13) > 1e-9 {
		t.Errorf("an explicit bound must win over the SLO's: %v s, %v s", a.MaxWaitSeconds, a.MaxInterTokenSeconds)
	}
	withSLO, err := WithRouteSLO("", admission.SLO{TTFTSeconds: 5, TPOTSeconds: 0.15})
	if err != nil {
		t.Fatal(err)
	}
	if a := load(withSLO); a.MaxWaitSeconds != 3.75 || math.Abs(a.MaxInterTokenSeconds-0.0975) > 1e-9 {
		t.Errorf("the route's 5 s / 150 ms SLO: bounds %v s, %v s", a.MaxWaitSeconds, a.MaxInterTokenSeconds)
	}
	own := Default + "admission: {slo: {ttftSeconds: 1, tpotSeconds: 0.05}}"
	if kept, err := WithRouteSLO(own, admission.SLO{TTFTSeconds: 5, TPOTSeconds: 0.15}); err != nil || load(kept).MaxWaitSeconds != 0.75 {
		t.Errorf("a configuration's own SLO must stay: %v", err)
	}
}

// sloRecorder is a scorer that records the route SLO the build gives it.
type sloRecorder struct {
	scheduling.Named
	got *admission.SLO
}

func (r *sloRecorder) Score(*scheduling.Cycle, []*datastore.View, []float64) {}
func (r *sloRecorder) UseRouteSLO(slo admission.SLO)                         { *r.got = slo }

// Every plugin that keeps the route's SLO gets it from the build: the
// admission SLO when the configuration has one, else the default.
func TestPluginsGetTheRouteSLO(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       admission.SLO
	}{
		{"none named", "", admission.DefaultSLO},
		{"the route's", "admission: {slo: {ttftSeconds: 4, tpotSeconds: 0.2}}", admission.SLO{TTFTSeconds: 4, TPOTSeconds: 0.2}},
	} {
		var got admission.SLO
		reg := plugins.NewRegistry()
		reg.Register("slo-recorder", func(name string, _ scheduling.Parameters) (scheduling.Plugin, error) {
			return &sloRecorder{Named: scheduling.Named{TypeName: "slo-recorder", InstanceName: name}, got: &got}, nil
		})
		if _, err := Load([]byte("scorers: [{plugin: slo-recorder, weight: 1}]\npicker: max-score-picker\n"+tc.text), reg); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: the plugin got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
