// Package labelselector keeps only endpoints whose labels match.
package labelselector

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "label-selector-filter"

// Parameters name the labels an endpoint must carry.
type Parameters struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// Filter drops endpoints lacking any of the labels, e.g. to pin a model to a
// GPU class.
type Filter struct {
	scheduling.Named
	match map[string]string
}

var _ scheduling.Filter = (*Filter)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	if len(p.MatchLabels) == 0 {
		return nil, fmt.Errorf("matchLabels must name at least one label")
	}
	return &Filter{Named: n, match: p.MatchLabels}, nil
})

// Filter implements scheduling.Filter.
func (f *Filter) Filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	out := in[:0]
	for _, v := range in {
		if matches(v.Labels, f.match) {
			out = append(out, v)
		}
	}
	return out
}

func matches(labels, want map[string]string) bool {
	for k, val := range want {
		if got, ok := labels[k]; !ok || got != val {
			return false
		}
	}
	return true
}
