package plugins_test

import (
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
)

// needsParameters are the built-in types that cannot be built from defaults.
var needsParameters = map[string]string{"label-selector-filter": `{"matchLabels": {"gpu": "h100"}}`}

// Every built-in type is registered under its own name and builds into
// exactly one kind of plugin; the registry names the instance.
func TestRegistryBuildsEveryBuiltIn(t *testing.T) {
	r := plugins.NewRegistry()
	types := r.Types()
	if len(types) != 13 {
		t.Fatalf("%d built-in types registered, want 13: %v", len(types), types)
	}
	for _, typ := range types {
		p, err := r.New(typ, "", scheduling.Parameters(needsParameters[typ]))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if p.Type() != typ || p.Name() != typ {
			t.Errorf("%s built as type %q named %q", typ, p.Type(), p.Name())
		}
		_, filter := p.(scheduling.Filter)
		_, scorer := p.(scheduling.Scorer)
		_, picker := p.(scheduling.Picker)
		if n := btoi(filter) + btoi(scorer) + btoi(picker); n != 1 {
			t.Errorf("%s is %d of filter, scorer and picker, want exactly one", typ, n)
		}
		if named, err := r.New(typ, "mine", scheduling.Parameters(needsParameters[typ])); err != nil || named.Name() != "mine" {
			t.Errorf("%s: instance name not kept (%v)", typ, err)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestRegistryRejectsUnknown(t *testing.T) {
	r := plugins.NewRegistry()
	if _, err := r.New("no-such-plugin", "", nil); err == nil || !strings.Contains(err.Error(), "queue") {
		t.Fatalf("unknown type: error %v, want one listing the known types", err)
	}
	if _, err := r.New("queue", "q1", scheduling.Parameters(`{"bogus": 1}`)); err == nil || !strings.Contains(err.Error(), `plugin "q1" (type queue)`) {
		t.Fatalf("unknown parameter: error %v, want one naming the instance and type", err)
	}
	if _, err := r.New("label-selector-filter", "", nil); err == nil {
		t.Fatal("label filter without labels accepted")
	}
}
