package labelselector

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// Endpoints lacking a label, or carrying another value, are dropped; extra
// labels do not matter.
func TestKeepsEndpointsCarryingEveryLabel(t *testing.T) {
	vs := plugintest.Views(make([]datastore.Metrics, 4)...)
	vs[0].Labels = map[string]string{"gpu": "h100", "zone": "a"}
	vs[1].Labels = map[string]string{"gpu": "h100"}
	vs[2].Labels = map[string]string{"gpu": "a10g", "zone": "a"}
	c := plugintest.Cycle(&scheduling.Request{}, nil)
	for _, tc := range []struct{ params, want string }{
		{`{"matchLabels": {"gpu": "h100"}}`, "ab"},
		{`{"matchLabels": {"gpu": "h100", "zone": "a"}}`, "a"},
		{`{"matchLabels": {"gpu": "b200"}}`, ""},
	} {
		f := plugintest.New[*Filter](t, New, tc.params)
		if got := plugintest.Keys(f.Filter(c, append([]*datastore.View(nil), vs...))); got != tc.want {
			t.Errorf("%s kept %q, want %q", tc.params, got, tc.want)
		}
	}
}

func TestRejectsMissingLabels(t *testing.T) {
	for _, params := range []string{"", `{"matchLabels": {}}`, `{"labels": {"gpu": "h100"}}`} {
		if _, err := New(Type, scheduling.Parameters(params)); err == nil {
			t.Errorf("parameters %q accepted", params)
		}
	}
}
