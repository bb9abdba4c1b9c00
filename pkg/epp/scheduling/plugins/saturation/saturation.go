// Package saturation drops saturated endpoints while unsaturated ones remain.
package saturation

import (
	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "saturation-filter"

// Filter keeps the endpoints that are not saturated by the admission
// thresholds in its parameters; if all are saturated it keeps all, leaving the
// decision to the scorers (and admission to shedding).
type Filter struct {
	scheduling.Named
	limits admission.Limits
}

var _ scheduling.Filter = (*Filter)(nil)

// New is the registry factory; the parameters are admission.Limits.
var New = scheduling.WithParameters(Type, admission.DefaultLimits, func(n scheduling.Named, l admission.Limits) (scheduling.Plugin, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Filter{Named: n, limits: l}, nil
})

// Filter implements scheduling.Filter.
func (f *Filter) Filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	n := 0
	for _, v := range in {
		if !f.limits.Saturated(v) {
			n++
		}
	}
	if n == 0 || n == len(in) {
		return in
	}
	out := in[:0]
	for _, v := range in {
		if !f.limits.Saturated(v) {
			out = append(out, v)
		}
	}
	return out
}
