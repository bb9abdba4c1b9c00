// Package scenario reads benchmark scenario files (bench/scenarios/README.md
// is the schema): a fleet of simulated model-server pods and a workload. Every
// key of the schema is accepted; an unknown key is an error naming the key, the
// file, the line and the keys known there, so a typo never silently falls back
// to a default. The schema is the yaml tags of the types below: a new key is a
// new tagged field.
package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/igw-dev/igw/pkg/sim"
)

// DefaultScrapeInterval is how often the picker sees fresh telemetry when the
// scenario does not say.
const DefaultScrapeInterval = 50 * time.Millisecond

// DefaultKVEventDelay is the KV event delay when the scenario does not say:
// a batch's trip through the pod's PUB socket and the picker's subscriber.
const DefaultKVEventDelay = 5 * time.Millisecond

// Scenario is one scenario file.
type Scenario struct {
	Name     string        `yaml:"name"`
	Duration time.Duration `yaml:"duration"`
	Warmup   time.Duration `yaml:"warmup"`
	// ScrapeInterval is the telemetry refresh period (staleness); defaulted on load.
	ScrapeInterval time.Duration `yaml:"scrapeInterval"`
	// KVEventDelay is how long the pods' KV events take to reach a router
	// that reads them; defaulted on load.
	KVEventDelay time.Duration `yaml:"kvEventDelay"`
	Fleet        []Group       `yaml:"fleet"`
	// Clusters replace fleet in a multi-cluster scenario (clusters.go): each
	// member cluster has its own fleet and in-cluster router.
	Clusters []Cluster `yaml:"clusters"`
	// Network is the one-way delay between regions (clusters.go).
	Network  []Link   `yaml:"network"`
	Workload Workload `yaml:"workload"`
	SLO      SLO      `yaml:"slo"`
	// Faults are misbehaviours of single pods over time (faults.go).
	Faults []Fault `yaml:"faults"`
	// Outages make whole member clusters unreachable (clusters.go).
	Outages []Outage `yaml:"outages"`

	// File is the path the scenario was read from ("" when parsed from bytes).
	File string `yaml:"-"`
}

// Group is one set of identical pods; its keys are exactly sim.Config's.
type Group struct {
	Name                string        `yaml:"name"`
	Replicas            int           `yaml:"replicas"`
	GPU                 string        `yaml:"gpu"`
	Model               string        `yaml:"model"`
	TensorParallel      int           `yaml:"tensorParallel"`
	MaxNumSeqs          int           `yaml:"maxNumSeqs"`
	MaxNumBatchedTokens int           `yaml:"maxNumBatchedTokens"`
	KVCacheTokens       KVTokens      `yaml:"kvCacheTokens"`
	MaxLoras            int           `yaml:"maxLoras"`
	LoRALoadTime        time.Duration `yaml:"loraLoadTime"`
	SpeedJitter         float64       `yaml:"speedJitter"`
}

// KVTokens is the kvCacheTokens value: 0 for auto, else a number of tokens.
type KVTokens int

// Workload is what the clients send.
type Workload struct {
	Arrival      Arrival       `yaml:"arrival"`
	Stages       []Stage       `yaml:"stages"`
	Input        Dist          `yaml:"input"`
	Output       Dist          `yaml:"output"`
	SharedPrefix *SharedPrefix `yaml:"sharedPrefix"`
	MultiTurn    *MultiTurn    `yaml:"multiTurn"`
	LoRA         *LoRA         `yaml:"lora"`
	// Trace, when set, gives the arrivals, lengths and prefixes instead.
	Trace *Trace `yaml:"trace"`
	// Origins are the client regions sessions come from, by share
	// (multi-cluster scenarios).
	Origins []Origin `yaml:"origins"`
}

// Arrival processes.
const (
	ArrivalPoisson  = "poisson"
	ArrivalGamma    = "gamma"
	ArrivalOnOff    = "onoff"
	ArrivalConstant = "constant"
)

// Arrival is the process of new sessions (requests, or conversations with multiTurn).
type Arrival struct {
	Type string  `yaml:"type"`
	Rate float64 `yaml:"rate"`
	// CV is the coefficient of variation of inter-arrival times (gamma; also
	// inside onoff bursts, where 0 means Poisson).
	CV  float64       `yaml:"cv"`
	On  time.Duration `yaml:"on"`
	Off time.Duration `yaml:"off"`
}

// Stage is one piece of a piecewise arrival rate; stages run in turn from the
// start, then arrival.rate applies again.
type Stage struct {
	Rate     float64       `yaml:"rate"`
	Duration time.Duration `yaml:"duration"`
}

// Distributions.
const (
	DistLognormal = "lognormal"
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistNormal    = "normal"
)

// Dist is a distribution of token counts or, for thinkTime, of durations
// (written as Go durations or as seconds). Min and Max clamp every draw
// (uniform draws between them).
type Dist struct {
	Dist   string   `yaml:"dist"`
	Median Quantity `yaml:"median"` // lognormal
	Sigma  float64  `yaml:"sigma"`  // lognormal: σ of the log; normal: standard deviation (alias of stddev)
	Value  Quantity `yaml:"value"`  // fixed
	Mean   Quantity `yaml:"mean"`   // normal
	Stddev Quantity `yaml:"stddev"` // normal
	Min    Quantity `yaml:"min"`
	Max    Quantity `yaml:"max"`
}

// Quantity is a number read either as a plain number or as a Go duration
// (stored in seconds), so one Dist type serves token counts and think times.
type Quantity struct {
	V   float64
	Set bool
}

// Q returns a set quantity.
func Q(v float64) Quantity { return Quantity{V: v, Set: true} }

// SharedPrefix gives users in groups a common system prompt.
type SharedPrefix struct {
	Groups             int `yaml:"groups"`
	UsersPerGroup      int `yaml:"usersPerGroup"`
	SystemPromptTokens int `yaml:"systemPromptTokens"`
	// FixedQuestions makes each user ask one question of its own every time,
	// the users taking turns in one shuffled order (inference-perf's
	// shared_prefix data): a user's whole prompt repeats. Otherwise every
	// request draws a user at random and asks a new question.
	FixedQuestions bool `yaml:"fixedQuestions"`
}

// MaxFixedQuestionUsers bounds groups × usersPerGroup with fixedQuestions:
// the users' order is one shuffled list.
const MaxFixedQuestionUsers = 1_000_000

// MultiTurn turns each session into a conversation whose context grows.
type MultiTurn struct {
	Turns     int  `yaml:"turns"`
	ThinkTime Dist `yaml:"thinkTime"`
}

// LoRA makes a fraction of sessions name an adapter.
type LoRA struct {
	Adapters   int        `yaml:"adapters"`
	Fraction   float64    `yaml:"fraction"`
	Popularity Popularity `yaml:"popularity"`
}

// Popularity distributions of adapters.
const (
	PopularityZipf    = "zipf"
	PopularityUniform = "uniform"
)

// Popularity is how adapters are chosen: zipf with exponent S, or uniform.
type Popularity struct {
	Dist string  `yaml:"dist"`
	S    float64 `yaml:"s"`
}

// SLO bounds a request must meet to count as goodput (0: unbounded).
type SLO struct {
	TTFT time.Duration `yaml:"ttft"`
	TPOT time.Duration `yaml:"tpot"`
}

// Load reads and validates the scenario file at path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse reads and validates a scenario; file names it in errors.
func Parse(data []byte, file string) (*Scenario, error) {
	var s Scenario
	if err := decodeStrict(data, file, &s); err != nil {
		return nil, err
	}
	s.File = file
	if s.ScrapeInterval == 0 {
		s.ScrapeInterval = DefaultScrapeInterval
	}
	if s.KVEventDelay == 0 {
		s.KVEventDelay = DefaultKVEventDelay
	}
	if s.Workload.Trace != nil {
		// The trace's window is the arrival time: duration is ignored.
		if err := s.loadTrace(); err != nil {
			return nil, fmt.Errorf("%s: %w", nameOr(file), err)
		}
	}
	if err := s.Validate(); err != nil {
		if file == "" {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &s, nil
}

// PodConfigs returns one simulator configuration per pod, in fleet order, each
// seeded from seed and the pod's index.
func (s *Scenario) PodConfigs(seed uint64) []sim.Config {
	var out []sim.Config
	for _, g := range s.Groups() {
		for range g.Replicas {
			out = append(out, sim.Config{
				GPU: g.GPU, Model: g.Model, TensorParallel: g.TensorParallel, MaxNumSeqs: g.MaxNumSeqs,
				MaxNumBatchedTokens: g.MaxNumBatchedTokens, KVCacheTokens: int(g.KVCacheTokens),
				MaxLoras: g.MaxLoras, LoRALoadTime: g.LoRALoadTime, SpeedJitter: g.SpeedJitter,
				Seed: seed*1_000_003 + uint64(len(out)),
			})
		}
	}
	return out
}

// PodGroups returns the fleet group name of each pod, in PodConfigs order.
func (s *Scenario) PodGroups() []string {
	var out []string
	for _, g := range s.Groups() {
		for range g.Replicas {
			out = append(out, g.Name)
		}
	}
	return out
}

// MaxContext is the longest prompt plus output every pod of the fleet accepts.
func (s *Scenario) MaxContext() int {
	limit := 0
	for _, cfg := range s.PodConfigs(0) {
		e, err := sim.New(cfg)
		if err != nil {
			continue // Validate reports it
		}
		if limit == 0 || e.MaxModelLen() < limit {
			limit = e.MaxModelLen()
		}
	}
	return limit
}

// Model is the served model name: the first group's (a fleet serves one model).
func (s *Scenario) Model() string { return s.Groups()[0].Model }

// Validate reports every invalid value in one error.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Name == "" {
		bad("name is required")
	}
	if s.Duration <= 0 {
		bad("duration must be positive, got %v", s.Duration)
	}
	if s.Warmup < 0 || (s.Duration > 0 && s.Warmup >= s.Duration) {
		bad("warmup must be in [0, duration), got %v", s.Warmup)
	}
	if s.ScrapeInterval < 0 {
		bad("scrapeInterval must be positive, got %v", s.ScrapeInterval)
	}
	if s.KVEventDelay < 0 || s.KVEventDelay > time.Minute {
		bad("kvEventDelay must be in (0, 1m], got %v", s.KVEventDelay)
	}
	switch {
	case len(s.Clusters) > 0 && len(s.Fleet) > 0:
		bad("fleet and clusters are both given: a multi-cluster scenario lists each cluster's fleet under clusters[].fleet; remove fleet")
	case len(s.Clusters) > 0:
		errs = append(errs, s.validateClusters()...)
	default:
		if len(s.Fleet) == 0 {
			bad("fleet needs at least one group")
		}
		errs = append(errs, validateFleet("fleet", s.Fleet, s.Model)...)
		errs = append(errs, s.validateSingleCluster()...)
	}
	errs = append(errs, s.Workload.validate(s.Groups())...)
	errs = append(errs, s.validateFaults()...)
	if s.SLO.TTFT < 0 || s.SLO.TPOT < 0 {
		bad("slo values must not be negative")
	}
	return errors.Join(errs...)
}

// validateFleet checks one fleet's groups (path names it in errors); model
// is the scenario's one served model.
func validateFleet(path string, fleet []Group, model func() string) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	names := map[string]bool{}
	for i, g := range fleet {
		if g.Name == "" {
			bad("%s[%d].name is required", path, i)
		} else if names[g.Name] {
			bad("%s[%d].name %q is used twice", path, i, g.Name)
		}
		names[g.Name] = true
		if g.Replicas < 1 || g.Replicas > 4096 {
			bad("%s[%d].replicas must be in 1..4096, got %d", path, i, g.Replicas)
		}
		if g.Model != model() {
			bad("%s[%d].model %q differs from the first group's %q: a scenario serves one model", path, i, g.Model, model())
		}
		cfg := sim.Config{GPU: g.GPU, Model: g.Model, TensorParallel: g.TensorParallel, MaxNumSeqs: g.MaxNumSeqs,
			MaxNumBatchedTokens: g.MaxNumBatchedTokens, KVCacheTokens: int(g.KVCacheTokens), MaxLoras: g.MaxLoras,
			LoRALoadTime: g.LoRALoadTime, SpeedJitter: g.SpeedJitter}
		if err := cfg.WithDefaults().Validate(); err != nil {
			bad("%s[%d] (%s): %w", path, i, g.Name, err)
		}
	}
	return errs
}

func (w *Workload) validate(fleet []Group) []error {
	if w.Trace != nil {
		errs := w.Trace.validate(w)
		if len(w.Trace.Records) == 0 {
			errs = append(errs, fmt.Errorf("workload.trace has no requests (the scenario was not loaded from its file)"))
		}
		return append(errs, w.LoRA.validate(fleet)...)
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	a := w.Arrival
	switch a.Type {
	case ArrivalPoisson, ArrivalConstant:
	case ArrivalGamma:
		if !(a.CV > 0) || math.IsInf(a.CV, 0) {
			bad("workload.arrival.cv must be positive for gamma arrivals, got %v", a.CV)
		}
	case ArrivalOnOff:
		if a.On <= 0 || a.Off < 0 {
			bad("workload.arrival.on must be positive and off not negative for onoff arrivals")
		}
		if !(a.CV >= 0) || math.IsInf(a.CV, 0) {
			bad("workload.arrival.cv must not be negative, got %v", a.CV)
		}
	default:
		bad("workload.arrival.type must be one of poisson, gamma, onoff, constant; got %q", a.Type)
	}
	if !(a.Rate >= 0) || a.Rate > 1e6 {
		bad("workload.arrival.rate must be in [0, 1e6], got %v", a.Rate)
	}
	positive := a.Rate > 0
	for i, st := range w.Stages {
		if !(st.Rate >= 0) || st.Rate > 1e6 || st.Duration <= 0 {
			bad("workload.stages[%d] needs a rate in [0, 1e6] and a positive duration", i)
		}
		positive = positive || st.Rate > 0
	}
	if !positive {
		bad("workload.arrival.rate (or a stage's rate) must be positive")
	}
	if err := w.Input.validate("workload.input", true); err != nil {
		errs = append(errs, err)
	}
	if err := w.Output.validate("workload.output", true); err != nil {
		errs = append(errs, err)
	}
	if sp := w.SharedPrefix; sp != nil {
		if sp.Groups < 1 || sp.UsersPerGroup < 1 || sp.SystemPromptTokens < 1 || sp.Groups > 1e6 || sp.UsersPerGroup > 1e6 || sp.SystemPromptTokens > 1e6 {
			bad("workload.sharedPrefix needs groups, usersPerGroup and systemPromptTokens in 1..1e6")
		}
		if sp.FixedQuestions && sp.Groups*sp.UsersPerGroup > MaxFixedQuestionUsers {
			bad("workload.sharedPrefix.fixedQuestions takes at most %d users (groups × usersPerGroup), got %d", MaxFixedQuestionUsers, sp.Groups*sp.UsersPerGroup)
		}
		if sp.FixedQuestions && w.MultiTurn != nil {
			bad("workload.sharedPrefix.fixedQuestions cannot be combined with multiTurn: a fixed question is a single request (drop one of them)")
		}
	}
	if mt := w.MultiTurn; mt != nil {
		if mt.Turns < 1 || mt.Turns > 1000 {
			bad("workload.multiTurn.turns must be in 1..1000, got %d", mt.Turns)
		}
		if mt.ThinkTime.Dist == "" {
			mt.ThinkTime = Dist{Dist: DistFixed, Value: Q(0)}
		}
		if err := mt.ThinkTime.validate("workload.multiTurn.thinkTime", false); err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, w.LoRA.validate(fleet)...)
}

// validate checks the adapters' keys (none given is valid).
func (l *LoRA) validate(fleet []Group) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if l != nil {
		if l.Adapters < 1 || l.Adapters > 1e5 {
			bad("workload.lora.adapters must be in 1..1e5, got %d", l.Adapters)
		}
		if !(l.Fraction >= 0 && l.Fraction <= 1) {
			bad("workload.lora.fraction must be in [0, 1], got %v", l.Fraction)
		}
		switch l.Popularity.Dist {
		case "", PopularityUniform:
		case PopularityZipf:
			if !(l.Popularity.S > 0) || l.Popularity.S > 100 {
				bad("workload.lora.popularity.s must be in (0, 100], got %v", l.Popularity.S)
			}
		default:
			bad("workload.lora.popularity.dist must be zipf or uniform, got %q", l.Popularity.Dist)
		}
		if l.Fraction > 0 {
			for i, g := range fleet {
				if g.MaxLoras < 1 {
					bad("workload.lora sends adapters but fleet[%d] (%s) has no adapter slots (maxLoras)", i, g.Name)
				}
			}
		}
	}
	return errs
}

// validate checks a distribution; counts (token lengths) must be at least 1.
func (d *Dist) validate(path string, counts bool) error {
	lowest := 0.0
	if counts {
		lowest = 1
	}
	const highest = 1e7
	ok := func(q Quantity) bool { return q.V >= 0 && q.V <= highest }
	switch d.Dist {
	case DistLognormal:
		if !d.Median.Set || !(d.Median.V > 0) || !ok(d.Median) || !(d.Sigma >= 0) || d.Sigma > 10 {
			return fmt.Errorf("%s: lognormal needs a positive median and sigma in [0, 10]", path)
		}
	case DistFixed:
		if !d.Value.Set || !ok(d.Value) || d.Value.V < lowest {
			return fmt.Errorf("%s: fixed needs a value of at least %v", path, lowest)
		}
	case DistUniform:
		if !d.Min.Set || !d.Max.Set {
			return fmt.Errorf("%s: uniform needs min and max", path)
		}
	case DistNormal:
		if !d.Mean.Set || !ok(d.Mean) {
			return fmt.Errorf("%s: normal needs a mean in [0, %g]", path, highest)
		}
		if d.Stddev.Set && d.Sigma != 0 && d.Stddev.V != d.Sigma {
			return fmt.Errorf("%s: normal has both stddev and sigma", path)
		}
		if !(d.Sigma >= 0) || math.IsInf(d.Sigma, 0) || d.Stddev.V < 0 {
			return fmt.Errorf("%s: normal's stddev must not be negative", path)
		}
	default:
		return fmt.Errorf("%s.dist must be one of lognormal, fixed, uniform, normal; got %q", path, d.Dist)
	}
	if (d.Min.Set && !ok(d.Min)) || (d.Max.Set && !ok(d.Max)) {
		return fmt.Errorf("%s: min and max must be in [0, %g]", path, highest)
	}
	if d.Min.Set && d.Max.Set && d.Min.V > d.Max.V {
		return fmt.Errorf("%s: min %v is above max %v", path, d.Min.V, d.Max.V)
	}
	if counts && d.Max.Set && d.Max.V < 1 {
		return fmt.Errorf("%s: max must be at least 1", path)
	}
	return nil
}
