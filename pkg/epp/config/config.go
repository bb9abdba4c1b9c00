// Package config is the endpoint picker's configuration file: which plugins
// run, with which parameters and weights, plus prefix-index, timing-model and
// admission settings. The operator renders this file into a ConfigMap from
// its CRDs, so the schema below is a contract: add fields, never rename them.
//
// Schema (YAML; every section is optional, shown with its defaults):
//
//	plugins:                  # named plugin instances with parameters
//	- name: prefix            # instance name (default: the type)
//	  type: prefix-cache      # a registered type name (kebab-case)
//	  parameters:             # type-specific; unknown keys are an error
//	    minMatchTokens: 128
//	filters: []               # plugin names (or bare type names), applied in order
//	scorers:                  # plugin names (or bare type names) with weights ≥ 0
//	- plugin: predicted-latency
//	  weight: 1
//	picker: max-score-picker  # plugin name or type: max-score-picker | weighted-random-picker
//	fallbacks: 2              # endpoints returned after the destination, for retries
//	prefix:
//	  blockTokens: 0          # index block in tokens; 0: the smallest multiple of the servers'
//	                          # block size (vllm:cache_config_info, 16 until reported) ≥ 128
//	  maxBlocks: 0            # prompt blocks hashed at most; 0: 256 (× 128 tokens ≈ 32k tokens),
//	                          # or a fourteenth of the largest server's KV cache if more
//	latency:                  # the servers' timing model
//	  chunkTokens: 8192       # chunked-prefill token budget per step
//	  kvPressureThreshold: 0.9
//	  kvPressureFactor: 4
//	admission:
//	  enabled: true
//	  queueDepth: 5           # an endpoint with this many waiting requests is saturated
//	  kvCacheUtilization: 0.8 # ... or with this KV-cache use
//	  shedBelowPriority: 0    # when all are saturated, priorities below this get 429
//	  maxRetryAfterSeconds: 60
//	  slo: {ttftSeconds: 2, tpotSeconds: 0.1}  # the route's promise; the bounds below
//	                          # follow it (3/4 of ttft, 0.65 of tpot, up to 0.9 where an
//	                          # endpoint's slow streams run close to its mean) unless set themselves
//	  maxWaitSeconds: 1.5     # overloaded: a new request would wait longer for its first token
//	  maxInterTokenSeconds: 0.065 # ... or tokens come further apart there; when every endpoint
//	                          # is overloaded any request gets 429 (0 turns a bound off;
//	                          # endpoints serving LoRA adapters: see admission.Policy.WaitExceeded)
//	  queue:                  # the picker's own queue: a request that finds every endpoint
//	    maxRequests: 8        # overloaded waits there for one to come within the bounds;
//	    maxBytes: 33554432    # past these bounds it gets 429 at once (maxRequests 0: no queue)
//	    maxWaitSeconds: 0.25  # at most this long (1/8 of ttft), taken from its maxWaitSeconds
//	baseModels: []            # model names that are not LoRA adapters (else: x-gateway-base-model-name decides)
//	trust:                    # request headers the picker acts on; a client can send any
//	                          # header, so each is off until a trusted source is the only one
//	                          # that can set it (the body-based router removes every client-sent
//	                          # x-gateway-*/x-igw-* header, so a filter after it is such a source)
//	  debugHeader: false      # answer x-igw-debug: 1 with x-igw-score-breakdown (endpoint
//	                          # addresses and scores); off: the header is ignored
//	  priorityHeader: false   # take the admission priority from x-igw-priority; off: every
//	                          # request has priority 0 (shedBelowPriority still applies to it)
//
// A scorer, filter or picker may name a type directly when it needs no
// parameters; a type appearing in plugins under its own name is that instance.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/maxscore"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/predictedlatency"
)

// Config is the file's content.
type Config struct {
	Plugins    []PluginSpec   `json:"plugins,omitempty"`
	Filters    []string       `json:"filters,omitempty"`
	Scorers    []ScorerSpec   `json:"scorers,omitempty"`
	Picker     string         `json:"picker,omitempty"`
	Fallbacks  *int           `json:"fallbacks,omitempty"`
	Prefix     PrefixSpec     `json:"prefix,omitempty"`
	Latency    *LatencySpec   `json:"latency,omitempty"`
	Admission  *AdmissionSpec `json:"admission,omitempty"`
	BaseModels []string       `json:"baseModels,omitempty"`
	Trust      TrustSpec      `json:"trust,omitzero"`
}

// TrustSpec says which of the picker's request headers it acts on.
type TrustSpec struct {
	DebugHeader    bool `json:"debugHeader,omitempty"`
	PriorityHeader bool `json:"priorityHeader,omitempty"`
}

// PluginSpec is one plugin instance.
type PluginSpec struct {
	Name       string          `json:"name,omitempty"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ScorerSpec is a scorer and its weight.
type ScorerSpec struct {
	Plugin string  `json:"plugin"`
	Weight float64 `json:"weight"`
}

// PrefixSpec configures the prefix index.
type PrefixSpec struct {
	BlockTokens int `json:"blockTokens,omitempty"`
	MaxBlocks   int `json:"maxBlocks,omitempty"`
}

// LatencySpec configures the timing model.
type LatencySpec struct {
	ChunkTokens         *int     `json:"chunkTokens,omitempty"`
	KVPressureThreshold *float64 `json:"kvPressureThreshold,omitempty"`
	KVPressureFactor    *float64 `json:"kvPressureFactor,omitempty"`
}

// AdmissionSpec configures shedding; omitted fields keep their defaults.
type AdmissionSpec struct {
	Enabled              *bool    `json:"enabled,omitempty"`
	QueueDepth           *int     `json:"queueDepth,omitempty"`
	KVCacheUtilization   *float64 `json:"kvCacheUtilization,omitempty"`
	ShedBelowPriority    *int     `json:"shedBelowPriority,omitempty"`
	MaxRetryAfterSeconds *int     `json:"maxRetryAfterSeconds,omitempty"`
	MaxWaitSeconds       *float64 `json:"maxWaitSeconds,omitempty"`
	MaxInterTokenSeconds *float64 `json:"maxInterTokenSeconds,omitempty"`
	// MissBudget is the share of requests placed over the bounds rather
	// than shed (admission.Policy.MissBudget).
	MissBudget *float64 `json:"missBudget,omitempty"`
	// SLO is the route's promise, which the overload bounds follow unless
	// they are set themselves.
	SLO *admission.SLO `json:"slo,omitempty"`
	// Queue bounds the picker's own queue.
	Queue *QueueSpec `json:"queue,omitempty"`
	// LateBinding holds requests until an endpoint would start them soon
	// (admission.LateBinding).
	LateBinding *LateBindingSpec `json:"lateBinding,omitempty"`
}

// LateBindingSpec configures late binding; omitted fields keep their defaults.
type LateBindingSpec struct {
	StartWithinChunks *float64 `json:"startWithinChunks,omitempty"`
	RoomSpec
}

// QueueSpec bounds the picker's queue; omitted fields keep their defaults.
type QueueSpec struct {
	RoomSpec
	MaxWaitSeconds *float64 `json:"maxWaitSeconds,omitempty"`
}

// RoomSpec bounds what the picker holds (admission.Room).
type RoomSpec struct {
	MaxRequests *int   `json:"maxRequests,omitempty"`
	MaxBytes    *int64 `json:"maxBytes,omitempty"`
}

// apply sets the fields of r that the spec names.
func (s RoomSpec) apply(r *admission.Room) {
	setIf(&r.MaxRequests, s.MaxRequests)
	setIf(&r.MaxBytes, s.MaxBytes)
}

// DefaultFallbacks, DefaultMaxPrefixBlocks and DefaultPrefixCacheShare
// apply when the file says nothing. The share keeps 256 blocks of 128
// tokens up to a cache of 458,752 tokens, so an H100 serving an 8B model,
// where the 256 were chosen, keys what it did (director.PrefixBlocks).
const (
	DefaultFallbacks        = 2
	DefaultMaxPrefixBlocks  = 256
	DefaultPrefixCacheShare = 1.0 / 14
)

// Default is the configuration used without a file: keep an adapter's
// requests off servers that do not list it (model-served-filter, which keeps
// every endpoint while no model lists are known), then rank by predicted time
// to first token, which already accounts for queues, cached prefixes, adapters
// and each endpoint's measured speed, plus the prefill time the choice costs
// the endpoint (so that a prefix-cache miss weighs what it costs the fleet,
// not only the request); among endpoints predicted alike, the least loaded
// wins (running-requests at a small weight), which keeps decode batches even.
// An endpoint far under an equal share of the picks takes the requests that
// are cheap for it (fair-share-floor, weighted above the others together).
const Default = `
plugins:
- name: predicted-latency
  type: predicted-latency
  parameters: {prefillWorkWeight: 1}
filters: [model-served-filter]
scorers:
- plugin: predicted-latency
  weight: 1
- plugin: running-requests
  weight: 0.2
- plugin: fair-share-floor
  weight: 2
picker: max-score-picker
`

// Parse reads a configuration file's bytes; unknown fields are errors.
func Parse(data []byte) (*Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("configuration is empty")
	}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parse configuration: %w", err)
	}
	return &c, nil
}

// Build validates c and builds a pipeline with plugins from reg.
func Build(c *Config, reg *scheduling.Registry) (*director.Pipeline, error) {
	instances := map[string]scheduling.Plugin{}
	for i, ps := range c.Plugins {
		name := ps.Name
		if name == "" {
			name = ps.Type
		}
		if ps.Type == "" {
			return nil, fmt.Errorf("plugins[%d]: type is required", i)
		}
		if _, dup := instances[name]; dup {
			return nil, fmt.Errorf("plugins[%d]: name %q used twice", i, name)
		}
		p, err := reg.New(ps.Type, name, scheduling.Parameters(ps.Parameters))
		if err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		instances[name] = p
	}
	lookup := func(ref string) (scheduling.Plugin, error) {
		if p, ok := instances[ref]; ok {
			return p, nil
		}
		p, err := reg.New(ref, ref, nil)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a plugin name nor a type: %w", ref, err)
		}
		instances[ref] = p
		return p, nil
	}

	prof := &scheduling.Profile{Fallbacks: DefaultFallbacks}
	if c.Fallbacks != nil {
		if *c.Fallbacks < 0 || *c.Fallbacks > 16 {
			return nil, fmt.Errorf("fallbacks must be in 0..16, got %d", *c.Fallbacks)
		}
		prof.Fallbacks = *c.Fallbacks
	}
	for i, ref := range c.Filters {
		p, err := lookup(ref)
		if err != nil {
			return nil, fmt.Errorf("filters[%d]: %w", i, err)
		}
		f, ok := p.(scheduling.Filter)
		if !ok {
			return nil, fmt.Errorf("filters[%d]: %q (type %s) is not a filter", i, ref, p.Type())
		}
		prof.Filters = append(prof.Filters, f)
	}
	if len(c.Scorers) == 0 {
		return nil, fmt.Errorf("scorers: at least one scorer is required (e.g. %s)", predictedlatency.Type)
	}
	for i, ss := range c.Scorers {
		p, err := lookup(ss.Plugin)
		if err != nil {
			return nil, fmt.Errorf("scorers[%d]: %w", i, err)
		}
		s, ok := p.(scheduling.Scorer)
		if !ok {
			return nil, fmt.Errorf("scorers[%d]: %q (type %s) is not a scorer", i, ss.Plugin, p.Type())
		}
		if ss.Weight < 0 || ss.Weight != ss.Weight {
			return nil, fmt.Errorf("scorers[%d]: weight must be ≥ 0, got %v", i, ss.Weight)
		}
		prof.Scorers = append(prof.Scorers, scheduling.WeightedScorer{Scorer: s, Weight: ss.Weight})
	}
	pickerRef := c.Picker
	if pickerRef == "" {
		pickerRef = maxscore.Type
	}
	p, err := lookup(pickerRef)
	if err != nil {
		return nil, fmt.Errorf("picker: %w", err)
	}
	picker, ok := p.(scheduling.Picker)
	if !ok {
		return nil, fmt.Errorf("picker: %q (type %s) is not a picker", pickerRef, p.Type())
	}
	prof.Picker = picker

	pl := &director.Pipeline{Profile: prof, Admission: admission.DefaultPolicy, Latency: latency.DefaultModel,
		BlockTokens: c.Prefix.BlockTokens, MaxPrefixBlocks: DefaultMaxPrefixBlocks, PrefixCacheShare: DefaultPrefixCacheShare,
		BaseModels: c.BaseModels, Trusted: director.TrustedHeaders{Debug: c.Trust.DebugHeader, Priority: c.Trust.PriorityHeader}}
	if c.Prefix.BlockTokens < 0 || c.Prefix.BlockTokens > 4096 {
		return nil, fmt.Errorf("prefix.blockTokens must be in 0..4096, got %d", c.Prefix.BlockTokens)
	}
	if c.Prefix.MaxBlocks < 0 || c.Prefix.MaxBlocks > 65536 {
		return nil, fmt.Errorf("prefix.maxBlocks must be in 0..65536, got %d", c.Prefix.MaxBlocks)
	}
	if c.Prefix.MaxBlocks > 0 {
		pl.MaxPrefixBlocks, pl.PrefixCacheShare = c.Prefix.MaxBlocks, 0
	}
	if l := c.Latency; l != nil {
		if l.ChunkTokens != nil {
			if *l.ChunkTokens < 0 {
				return nil, fmt.Errorf("latency.chunkTokens must not be negative")
			}
			pl.Latency.ChunkTokens = *l.ChunkTokens
		}
		if l.KVPressureThreshold != nil {
			if t := *l.KVPressureThreshold; !(t > 0 && t <= 1) {
				return nil, fmt.Errorf("latency.kvPressureThreshold must be in (0, 1], got %v", t)
			}
			pl.Latency.KVPressureThreshold = *l.KVPressureThreshold
		}
		if l.KVPressureFactor != nil {
			if f := *l.KVPressureFactor; !(f >= 0) {
				return nil, fmt.Errorf("latency.kvPressureFactor must be ≥ 0, got %v", f)
			}
			pl.Latency.KVPressureFactor = *l.KVPressureFactor
		}
	}
	routeSLO := admission.DefaultSLO
	if a := c.Admission; a != nil {
		setIf(&pl.Admission.Enabled, a.Enabled)
		setIf(&pl.Admission.QueueDepth, a.QueueDepth)
		setIf(&pl.Admission.KVCacheUtilization, a.KVCacheUtilization)
		setIf(&pl.Admission.ShedBelowPriority, a.ShedBelowPriority)
		setIf(&pl.Admission.MaxRetryAfterSeconds, a.MaxRetryAfterSeconds)
		if slo := a.SLO; slo != nil {
			if !(slo.TTFTSeconds > 0) || !(slo.TPOTSeconds > 0) || math.IsInf(slo.TTFTSeconds, 0) || math.IsInf(slo.TPOTSeconds, 0) {
				return nil, fmt.Errorf("admission: slo.ttftSeconds and slo.tpotSeconds must be finite and > 0, got %v and %v", slo.TTFTSeconds, slo.TPOTSeconds)
			}
			pl.Admission = pl.Admission.FitSLO(*slo)
			routeSLO = *slo
		}
		setIf(&pl.Admission.MaxWaitSeconds, a.MaxWaitSeconds)
		if a.MaxInterTokenSeconds != nil {
			pl.Admission.MaxInterTokenSeconds, pl.Admission.TPOTSeconds = *a.MaxInterTokenSeconds, 0
		}
		setIf(&pl.Admission.MissBudget, a.MissBudget)
		if b := pl.Admission.MissBudget; !(b >= 0 && b <= admission.MaxMissBudget) {
			return nil, fmt.Errorf("admission: missBudget must be in [0, %v] (a share of the requests; 0 sheds every overloaded request), got %v", admission.MaxMissBudget, b)
		}
		if q := a.Queue; q != nil {
			q.apply(&pl.Admission.Queue.Room)
			setIf(&pl.Admission.Queue.MaxWaitSeconds, q.MaxWaitSeconds)
		}
		if err := pl.Admission.Validate(); err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		if lb := a.LateBinding; lb != nil {
			setIf(&pl.Admission.LateBinding.StartWithinChunks, lb.StartWithinChunks)
			lb.apply(&pl.Admission.LateBinding.Room)
		}
		if err := pl.Admission.LateBinding.Validate(); err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		if err := pl.Admission.Queue.Validate(); err != nil {
			return nil, fmt.Errorf("admission: %w (0 requests turns the queue off)", err)
		}
		if pl.Admission.MaxRetryAfterSeconds < 1 {
			return nil, fmt.Errorf("admission: maxRetryAfterSeconds must be at least 1")
		}
		if w, g := pl.Admission.MaxWaitSeconds, pl.Admission.MaxInterTokenSeconds; !(w >= 0) || !(g >= 0) || math.IsInf(w, 0) || math.IsInf(g, 0) {
			return nil, fmt.Errorf("admission: maxWaitSeconds and maxInterTokenSeconds must be finite and ≥ 0 (0 turns the bound off)")
		}
	}
	for _, plugin := range prof.Plugins() {
		if u, ok := plugin.(admission.RouteSLOUser); ok {
			u.UseRouteSLO(routeSLO)
		}
	}
	return pl, nil
}

// Load parses and builds in one step.
func Load(data []byte, reg *scheduling.Registry) (*director.Pipeline, error) {
	c, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return Build(c, reg)
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// WithRouteSLO returns the configuration text (Default when empty) with
// the route's SLO for admission unless it names one: its overload bounds then
// follow the route's promise rather than DefaultSLO.
func WithRouteSLO(text string, slo admission.SLO) (string, error) {
	if text == "" {
		text = Default
	}
	c, err := Parse([]byte(text))
	if err != nil {
		return "", err
	}
	if c.Admission == nil {
		c.Admission = &AdmissionSpec{}
	}
	if c.Admission.SLO != nil {
		return text, nil
	}
	c.Admission.SLO = &slo
	out, err := yaml.Marshal(c)
	return string(out), err
}
