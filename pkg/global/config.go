package global

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/plugins"
)

// Pipeline is one configuration of the global picker.
type Pipeline struct {
	Profile *scheduling.Profile
	// MaxPrefixBlocks bounds how many prompt blocks are hashed for digests.
	MaxPrefixBlocks int
}

// DefaultFallbacks is how many fallbacks a pick names when the
// configuration does not say: one, the retry's.
const DefaultFallbacks = 1

// LoadPipeline builds a pipeline from a configuration in the endpoint
// picker's schema (plugins, filters, scorers, picker, fallbacks,
// prefix.maxBlocks), with the global registry (plugins.NewRegistry). The
// sections that configure model servers (latency, admission, baseModels,
// prefix.blockTokens: a digest carries its own block size) are errors.
func LoadPipeline(data []byte) (*Pipeline, error) { return LoadPipelineWith(data, nil) }

// LoadPipelineWith is LoadPipeline with extra plugin types beside the global
// registry's (the benchmark's baseline pickers).
func LoadPipelineWith(data []byte, extra map[string]scheduling.Factory) (*Pipeline, error) {
	c, err := config.Parse(data)
	if err != nil {
		return nil, err
	}
	return BuildPipelineWith(c, extra)
}

// BuildPipeline is LoadPipeline over a parsed configuration, for a caller
// that adds to it (the hub puts its region pins in).
func BuildPipeline(c *config.Config) (*Pipeline, error) { return BuildPipelineWith(c, nil) }

// BuildPipelineWith is BuildPipeline with extra plugin types (LoadPipelineWith).
func BuildPipelineWith(c *config.Config, extra map[string]scheduling.Factory) (*Pipeline, error) {
	switch {
	case c.Latency != nil, c.Admission != nil, len(c.BaseModels) > 0, c.Prefix.BlockTokens != 0:
		return nil, fmt.Errorf("latency, admission, baseModels and prefix.blockTokens configure an endpoint picker's model servers; remove them from the global picker's configuration")
	}
	if c.Fallbacks == nil {
		fb := DefaultFallbacks
		c.Fallbacks = &fb
	}
	pl, err := config.Build(c, plugins.NewRegistry(extra))
	if err != nil {
		return nil, err
	}
	return &Pipeline{Profile: pl.Profile, MaxPrefixBlocks: pl.MaxPrefixBlocks}, nil
}

// DefaultConfig is igw's global policy (igw-global): only members that may
// take the request (its region pins, in rotation, serving the model), ranked
// by the time to first token predicted there, network included, with the
// prefix the member's digest holds counted out of the work; then a share for
// prefix locality itself (what a turn keeps in cache for the next), KV room
// and errors.
const DefaultConfig = `
filters: [region-pin, member-health, member-serves-model]
scorers:
- {plugin: member-predicted-ttft, weight: 1}
- {plugin: member-prefix-locality, weight: 0.3}
- {plugin: member-headroom, weight: 0.1}
- {plugin: member-error-rate, weight: 0.2}
picker: max-score-picker
fallbacks: 1
`

// BlendConfig is the managed global router's policy (global-blend) as a
// configuration of the same plugins: KV headroom (the endpoint picker's
// kv-cache-utilization on member views), queue depth (its queue scorer),
// region proximity and error rate, weights summing to 1. The published
// default weights are not known here; equal weights stand in.
const BlendConfig = `
filters: [region-pin, member-health, member-serves-model]
scorers:
- {plugin: kv-cache-utilization, weight: 0.25}
- {plugin: queue, weight: 0.25}
- {plugin: region-proximity, weight: 0.25}
- {plugin: member-error-rate, weight: 0.25}
picker: max-score-picker
fallbacks: 1
`
