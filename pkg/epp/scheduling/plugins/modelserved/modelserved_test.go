package modelserved

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
)

// A request for an adapter avoids the endpoints whose model list lacks it
// while some endpoint lists it; endpoints with no list are kept, no list
// anywhere (or none listing the adapter) keeps every endpoint, and base-model
// requests are never filtered.
func TestKeepsAdapterOffEndpointsNotListingIt(t *testing.T) {
	withSQL := datastore.NewServedModels([]string{"m", "sql"}, plugintest.T0)
	without := datastore.NewServedModels([]string{"m", "chat"}, plugintest.T0)
	f := plugintest.New[scheduling.Filter](t, New, "")
	kept := func(req *scheduling.Request, lists ...*datastore.ServedModels) string {
		vs := plugintest.Views(make([]datastore.Metrics, len(lists))...)
		for i, l := range lists {
			vs[i].Models = l
		}
		return plugintest.Keys(f.Filter(plugintest.Cycle(req, nil), vs))
	}
	sql := &scheduling.Request{Adapter: "sql"}
	for _, c := range []struct {
		name  string
		req   *scheduling.Request
		lists []*datastore.ServedModels
		want  string
	}{
		{"known", sql, []*datastore.ServedModels{without, withSQL, without}, "b"},
		{"partially known", sql, []*datastore.ServedModels{withSQL, nil, without, withSQL}, "abd"},
		{"unknown", sql, []*datastore.ServedModels{nil, nil, nil}, "abc"},
		{"listed nowhere", sql, []*datastore.ServedModels{without, nil, without}, "abc"},
		{"base model", &scheduling.Request{Model: "m"}, []*datastore.ServedModels{without, withSQL, datastore.NewServedModels(nil, plugintest.T0)}, "abc"},
	} {
		if got := kept(c.req, c.lists...); got != c.want {
			t.Errorf("%s: kept %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRejectsParameters(t *testing.T) {
	if _, err := New(Type, scheduling.Parameters(`{"strict": true}`)); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}
