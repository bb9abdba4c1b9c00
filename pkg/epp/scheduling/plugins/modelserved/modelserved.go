// Package modelserved keeps a LoRA adapter's requests off endpoints whose
// servers do not list the adapter in their model list.
package modelserved

import (
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Type is the plugin's type name.
const Type = "model-served-filter"

// New is the registry factory; the filter has no parameters and no state.
var New = scheduling.StatelessFilter(Type, filter)

// filter drops, for a request naming an adapter, the endpoints known not to
// serve it (their last read model list lacks it), provided some endpoint is
// known to serve it. A server without the adapter answers such a request with
// a 404, and while the adapter runs nowhere the LoRA telemetry cannot tell the
// endpoints apart. Endpoints whose list was never read are kept, and when no
// endpoint is known to serve the adapter (no lists read, or an adapter loaded
// since the last reads) every endpoint is kept: the filter never turns a
// request that could be served into a 503. Base-model requests pass untouched.
func filter(c *scheduling.Cycle, in []*datastore.View) []*datastore.View {
	adapter := c.Request.Adapter
	if adapter == "" || !anyServes(in, adapter) {
		return in
	}
	out := in[:0]
	for _, v := range in {
		if v.Models == nil || v.Models.Serves(adapter) {
			out = append(out, v)
		}
	}
	return out
}

func anyServes(in []*datastore.View, model string) bool {
	for _, v := range in {
		if v.Models != nil && v.Models.Serves(model) {
			return true
		}
	}
	return false
}
