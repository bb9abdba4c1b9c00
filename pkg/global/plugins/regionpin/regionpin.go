// Package regionpin keeps a pinned model's requests in the regions it is
// pinned to (data residency). It is a hard filter: no health state, retry or
// spill-over brings such a request elsewhere; with no member left there the
// request gets a 503 that names the pin.
package regionpin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "region-pin"

// Pin keeps the requests naming Model (a base model or an adapter) in Regions.
type Pin struct {
	Model   string   `json:"model"`
	Regions []string `json:"regions"`
}

// Parameters of the filter.
type Parameters struct {
	Pins []Pin `json:"pins"`
}

// Filter drops members outside the regions of the request's model and of its
// adapter (both apply when both are pinned).
type Filter struct {
	scheduling.Named
	pins map[string]pinned
}

type pinned struct {
	regions []string
	note    string
}

var _ scheduling.Filter = (*Filter)(nil)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{}, func(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	f := &Filter{Named: n, pins: map[string]pinned{}}
	for i, pin := range p.Pins {
		if pin.Model == "" {
			return nil, fmt.Errorf("pins[%d]: model is required", i)
		}
		if len(pin.Regions) == 0 || slices.Contains(pin.Regions, "") {
			return nil, fmt.Errorf("pins[%d] (model %s): regions must list at least one region, none empty", i, pin.Model)
		}
		if _, dup := f.pins[pin.Model]; dup {
			return nil, fmt.Errorf("pins[%d]: model %s is pinned twice; list all its regions in one pin", i, pin.Model)
		}
		f.pins[pin.Model] = pinned{regions: slices.Clone(pin.Regions),
			note: fmt.Sprintf("model %s is pinned to regions [%s] (data residency)", pin.Model, strings.Join(pin.Regions, ", "))}
	}
	return f, nil
})

// Filter implements scheduling.Filter.
func (f *Filter) Filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	t := member.From(c)
	for _, name := range [2]string{c.Request.Model, c.Request.Adapter} {
		pin, ok := f.pins[name]
		if name == "" || !ok {
			continue
		}
		t.Note(pin.note)
		out := in[:0]
		for _, v := range in {
			if s := t.Of(v); s != nil && slices.Contains(pin.regions, s.Region) {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			t.Reject("no member cluster there is a candidate")
			return out
		}
		in = out
	}
	return in
}
