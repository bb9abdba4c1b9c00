package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/jsontime"
	"github.com/igw-dev/igw/internal/loadfile"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/plugins/regionpin"
	"github.com/igw-dev/igw/pkg/global/plugins/regionshaping"
)

// Config is the hub's configuration file (the operator renders it from a
// GlobalInferenceGateway; docs/global-tier.md has the schema). Unknown keys
// are errors.
type Config struct {
	// Region is the hub's own region: a request's origin when the edge does
	// not name one (x-igw-client-region). Empty (the operator renders no
	// region: a GlobalInferenceGateway has no hub region), such a request has
	// no origin: every member counts as equally far and no region's shaping
	// applies to it.
	Region string `json:"region,omitempty"`
	// Pipeline is a global picker configuration in the endpoint picker's
	// schema with the global registry; empty: Policy.
	Pipeline string `json:"pipeline,omitempty"`
	// Policy is igw-global (default) or global-blend; ignored with Pipeline.
	Policy string `json:"policy,omitempty"`
	// Weights override the policy's scorer weights, in thousandths (0 drops
	// the scorer; a scorer the policy lacks is added).
	Weights map[string]int `json:"weights,omitempty"`
	Members []MemberConfig `json:"members"`
	Models  []ModelConfig  `json:"models,omitempty"`
	Regions []RegionConfig `json:"regions,omitempty"`
	Health  HealthConfig   `json:"health,omitzero"`
}

// MemberConfig is one member cluster: its name, region and gateway address
// as the picker knows it, and where its summary is read.
type MemberConfig struct {
	global.Member
	// SummaryURLs are the member's summary documents (one per picker when it
	// has several), merged into one.
	SummaryURLs []string `json:"summaryURLs"`
	// TokenFile holds the bearer token the summaries want; CAFile, when set,
	// the CA that signs the members' serving certificates.
	TokenFile string `json:"tokenFile"`
	CAFile    string `json:"caFile,omitempty"`
}

// ModelConfig is one model served globally; Regions pins it (data residency).
type ModelConfig struct {
	Name    string   `json:"name"`
	Regions []string `json:"regions,omitempty"`
}

// RegionConfig shapes one client region's traffic (the region-shaping
// filter's rule: spill-over order, share allowed out of the region).
type RegionConfig = regionshaping.Rule

// HealthConfig tunes failure detection; zero fields keep the defaults.
type HealthConfig struct {
	ProbeInterval     jsontime.Duration `json:"probeInterval,omitzero"`
	ProbeTimeout      jsontime.Duration `json:"probeTimeout,omitzero"`
	FailedProbes      int               `json:"failedProbes,omitempty"`
	ConsecutiveErrors int               `json:"consecutiveErrors,omitempty"`
	BaseEjection      jsontime.Duration `json:"baseEjection,omitzero"`
	MaxEjection       jsontime.Duration `json:"maxEjection,omitzero"`
	SlowStart         jsontime.Duration `json:"slowStart,omitzero"`
}

// Default probe timing: every member polled every 0.5 s, 0.5 s allowed.
const (
	DefaultProbeInterval = 500 * time.Millisecond
	DefaultProbeTimeout  = 500 * time.Millisecond
)

// Policies the config may name.
const (
	PolicyIGWGlobal   = "igw-global"
	PolicyGlobalBlend = "global-blend"
)

// LoadConfig reads and validates the file at path.
func LoadConfig(path string) (*Config, error) { return loadfile.Parse(path, ParseConfig) }

// ParseConfig decodes a configuration strictly and validates it.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parse the hub configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate reports every problem, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Pipeline == "" && c.Policy != "" && c.Policy != PolicyIGWGlobal && c.Policy != PolicyGlobalBlend {
		bad("policy must be %s or %s, got %q", PolicyIGWGlobal, PolicyGlobalBlend, c.Policy)
	}
	if c.Pipeline != "" && len(c.Weights) > 0 {
		bad("weights apply to a policy; with pipeline, set the weights in it")
	}
	for name, w := range c.Weights {
		if w < 0 || w > 1000 {
			bad("weights[%s] is %d; want 0..1000 (thousandths)", name, w)
		}
	}
	if len(c.Members) == 0 {
		bad("members must list at least one member cluster")
	}
	regions := map[string]bool{}
	if _, err := c.members(); err != nil {
		errs = append(errs, err)
	}
	for i, m := range c.Members {
		regions[m.Region] = true
		if len(m.SummaryURLs) == 0 {
			bad("members[%d] (%s): summaryURLs must list the member's summary (https://HOST/igw/v1/global-summary)", i, m.Name)
		}
		for j, u := range m.SummaryURLs {
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				bad("members[%d] (%s): summaryURLs[%d] %q is not an http(s) URL", i, m.Name, j, u)
			}
		}
		if m.TokenFile == "" {
			bad("members[%d] (%s): tokenFile is required (the summary is never served without a token)", i, m.Name)
		}
	}
	seenModel := map[string]bool{}
	for i, m := range c.Models {
		if m.Name == "" {
			bad("models[%d]: name is required", i)
		}
		if seenModel[m.Name] {
			bad("models[%d]: model %s is listed twice", i, m.Name)
		}
		seenModel[m.Name] = true
		for _, r := range m.Regions {
			if !regions[r] {
				bad("models[%d] (%s): region %q has no member; pin to a region some member is in", i, m.Name, r)
			}
		}
	}
	for i, r := range c.Regions {
		if r.Region == "" {
			bad("regions[%d]: region is required", i)
		}
		for _, s := range r.SpillOver {
			if !regions[s] {
				bad("regions[%d] (%s): spillOver region %q has no member", i, r.Region, s)
			}
		}
		if r.MaxShare != nil && !(*r.MaxShare >= 0 && *r.MaxShare <= 1) {
			bad("regions[%d] (%s): maxShare %v; want 0..1", i, r.Region, *r.MaxShare)
		}
	}
	h := c.Health
	if h.ProbeTimeout.Duration > c.probeInterval() {
		bad("health.probeTimeout %s is longer than health.probeInterval %s; a probe must end before the next", h.ProbeTimeout, c.probeInterval())
	}
	if h.FailedProbes < 0 || h.ConsecutiveErrors < 0 {
		bad("health.failedProbes and health.consecutiveErrors must not be negative")
	}
	if h.BaseEjection.Duration > 0 && h.MaxEjection.Duration > 0 && h.MaxEjection.Duration < h.BaseEjection.Duration {
		bad("health.maxEjection %s is shorter than health.baseEjection %s", h.MaxEjection, h.BaseEjection)
	}
	if len(errs) == 0 {
		if _, err := c.BuildPipeline(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) probeInterval() time.Duration {
	if c.Health.ProbeInterval.Duration > 0 {
		return c.Health.ProbeInterval.Duration
	}
	return DefaultProbeInterval
}

func (c *Config) probeTimeout() time.Duration {
	if c.Health.ProbeTimeout.Duration > 0 {
		return c.Health.ProbeTimeout.Duration
	}
	return min(DefaultProbeTimeout, c.probeInterval())
}

// members are the picker's member list, validated as the picker does.
func (c *Config) members() ([]global.Member, error) {
	out := make([]global.Member, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Member
	}
	p, err := global.New(global.Options{})
	if err != nil {
		return nil, err
	}
	return out, p.SetMembers(out)
}

// healthSettings maps the file's health section onto the tracker's.
func (c *Config) healthSettings() health.Settings {
	h := c.Health
	return health.Settings{ProbeFailures: h.FailedProbes, ConsecutiveFailures: h.ConsecutiveErrors,
		EjectFor: h.BaseEjection.Duration, MaxEject: h.MaxEjection.Duration, SlowStart: h.SlowStart.Duration}
}

// BuildPipeline builds the picker's pipeline: the pipeline text, else the
// policy with the weights, and in either case the models' region pins as
// the first filter (a pin is data residency: no configuration leaves it out).
func (c *Config) BuildPipeline() (*global.Pipeline, error) {
	text := c.Pipeline
	if text == "" {
		text = global.DefaultConfig
		if c.Policy == PolicyGlobalBlend {
			text = global.BlendConfig
		}
	}
	pc, err := config.Parse([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if c.Pipeline == "" {
		applyWeights(pc, c.Weights)
	}
	if err := c.addPins(pc); err != nil {
		return nil, err
	}
	if err := c.addShaping(pc); err != nil {
		return nil, err
	}
	pl, err := global.BuildPipeline(pc)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return pl, nil
}

func applyWeights(pc *config.Config, weights map[string]int) {
	for _, name := range sortedKeys(weights) {
		w := float64(weights[name]) / 1000
		i := slices.IndexFunc(pc.Scorers, func(s config.ScorerSpec) bool { return s.Plugin == name })
		switch {
		case i >= 0 && w == 0:
			pc.Scorers = slices.Delete(pc.Scorers, i, i+1)
		case i >= 0:
			pc.Scorers[i].Weight = w
		case w > 0:
			pc.Scorers = append(pc.Scorers, config.ScorerSpec{Plugin: name, Weight: w})
		}
	}
}

// pinFilter names the region-pin instance the hub adds.
const pinFilter = "hub-region-pins"

func (c *Config) addPins(pc *config.Config) error {
	var pins []regionpin.Pin
	for _, m := range c.Models {
		if len(m.Regions) > 0 {
			pins = append(pins, regionpin.Pin{Model: m.Name, Regions: m.Regions})
		}
	}
	if len(pins) == 0 {
		return nil
	}
	for _, p := range pc.Plugins {
		if p.Type == regionpin.Type && len(p.Parameters) > 0 && string(p.Parameters) != "{}" && string(p.Parameters) != "null" {
			return fmt.Errorf("pipeline: a region-pin plugin with its own pins and models[].regions both pin models; name the pins in one place (models[].regions)")
		}
	}
	params, err := json.Marshal(regionpin.Parameters{Pins: pins})
	if err != nil {
		return err
	}
	pc.Plugins = append(pc.Plugins, config.PluginSpec{Name: pinFilter, Type: regionpin.Type, Parameters: params})
	// A bare region-pin filter holds no pins; the hub's instance replaces it.
	pc.Filters = slices.DeleteFunc(pc.Filters, func(f string) bool { return f == regionpin.Type })
	pc.Filters = append([]string{pinFilter}, pc.Filters...)
	return nil
}

// shapingFilter names the region-shaping instance the hub adds.
const shapingFilter = "hub-region-shaping"

// addShaping puts the regions' shaping last among the filters: it chooses
// among members that may take the request (pinned region, in rotation,
// serving the model), so "members at home" means ones that can serve.
func (c *Config) addShaping(pc *config.Config) error {
	if len(c.Regions) == 0 {
		return nil
	}
	if slices.ContainsFunc(pc.Plugins, func(p config.PluginSpec) bool { return p.Type == regionshaping.Type }) ||
		slices.Contains(pc.Filters, regionshaping.Type) {
		return fmt.Errorf("pipeline: a region-shaping filter in the pipeline and regions[] both shape regions; name the rules in one place (regions)")
	}
	params, err := json.Marshal(regionshaping.Parameters{Regions: c.Regions})
	if err != nil {
		return err
	}
	pc.Plugins = append(pc.Plugins, config.PluginSpec{Name: shapingFilter, Type: regionshaping.Type, Parameters: params})
	pc.Filters = append(pc.Filters, shapingFilter)
	return nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// summaryURLsText lists a member's summaries for logs and errors.
func summaryURLsText(m MemberConfig) string { return strings.Join(m.SummaryURLs, ", ") }
