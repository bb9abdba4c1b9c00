// Package servesmodel keeps the member clusters whose latest summary lists the
// request's model (and its adapter, when it names one) with a ready endpoint.
// A member that never sent a valid summary for the model is not a candidate:
// nothing says it could answer.
package servesmodel

import (
	"slices"
	"strconv"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
)

// Type is the plugin's type name.
const Type = "member-serves-model"

// New is the registry factory; the filter has no parameters and no state.
var New = scheduling.StatelessFilter(Type, filter)

// why says why s cannot serve the request ("" when it can).
func why(s *member.State, adapter string) string {
	switch {
	case s == nil || s.Summary == nil:
		return "has no summary of the model"
	case s.Summary.ReadyEndpoints == 0:
		return "has no ready endpoint (" + strconv.Itoa(s.Summary.Endpoints) + " known)"
	case adapter != "" && !slices.Contains(s.Summary.Adapters, adapter):
		return "does not list adapter " + adapter
	}
	return ""
}

// filter drops members that cannot serve the request's model.
func filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	t := member.From(c)
	out := in[:0]
	for _, v := range in {
		if why(t.Of(v), c.Request.Adapter) == "" {
			out = append(out, v)
		}
	}
	if len(out) > 0 {
		return out
	}
	lead := "no member cluster serves model " + c.Request.Model
	if c.Request.Adapter != "" {
		lead += " with adapter " + c.Request.Adapter
	}
	t.RejectEach(lead, in, func(s *member.State) string { return why(s, c.Request.Adapter) }) // nothing was kept, so in is intact
	return out
}
