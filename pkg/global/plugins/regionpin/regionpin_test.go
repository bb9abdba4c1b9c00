package regionpin

import (
	"slices"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
)

func TestPinnedModelStaysInItsRegions(t *testing.T) {
	f := plugintest.New[*Filter](t, New, `{"pins":[{"model":"llama-eu","regions":["eu-west-1","eu-central-1"]},{"model":"sql-eu","regions":["eu-central-1"]}]}`)
	m := membertest.Model("llama-eu")
	states := []member.State{
		membertest.Ready("use1", "us-east-1", m),
		membertest.Ready("euw1", "eu-west-1", m),
		membertest.Ready("euc1", "eu-central-1", m),
	}
	c, views := membertest.Cycle(&scheduling.Request{Model: "llama-eu"}, "us-east-1", membertest.Now, states...)
	if got := membertest.Names(c, f.Filter(c, views)); !slices.Equal(got, []string{"euw1", "euc1"}) {
		t.Fatalf("kept %v", got)
	}
	// An adapter's pin applies on top of its base model's.
	c, views = membertest.Decide(&scheduling.Request{Model: "llama-eu", Adapter: "sql-eu"}, states...)
	if got := membertest.Names(c, f.Filter(c, views)); !slices.Equal(got, []string{"euc1"}) {
		t.Fatalf("adapter kept %v", got)
	}
	// Unpinned models go anywhere.
	c, views = membertest.Decide(&scheduling.Request{Model: "qwen"}, states...)
	if got := f.Filter(c, views); len(got) != 3 {
		t.Fatalf("unpinned model kept %d", len(got))
	}
}

// TestNothingLeftSaysWhy: with every member of the pinned regions gone (out
// of the candidates, as after a failover), nothing is kept and the reason
// names the pin.
func TestNothingLeftSaysWhy(t *testing.T) {
	f := plugintest.New[*Filter](t, New, `{"pins":[{"model":"llama-eu","regions":["eu-west-1"]}]}`)
	m := membertest.Model("llama-eu")
	c, views := membertest.Decide(&scheduling.Request{Model: "llama-eu"}, membertest.Ready("use1", "us-east-1", m), membertest.Ready("usw2", "us-west-2", m))
	if got := f.Filter(c, views); len(got) != 0 {
		t.Fatalf("kept %d outside the pin", len(got))
	}
	if r := member.From(c).Rejection(); !strings.Contains(r, "model llama-eu is pinned to regions [eu-west-1] (data residency); no member cluster there") {
		t.Fatalf("reason %q", r)
	}
}

func TestParameters(t *testing.T) {
	for _, bad := range []string{
		`{"pins":[{"regions":["eu-west-1"]}]}`,
		`{"pins":[{"model":"m","regions":[]}]}`,
		`{"pins":[{"model":"m","regions":["a"]},{"model":"m","regions":["b"]}]}`,
		`{"pin":[]}`,
	} {
		if _, err := New(Type, scheduling.Parameters(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
