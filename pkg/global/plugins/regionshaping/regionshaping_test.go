package regionshaping

import (
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
)

func fleet() []member.State {
	m := membertest.Model("llama")
	return []member.State{
		membertest.Ready("use1", "us-east-1", m),
		membertest.Ready("euw1", "eu-west-1", m),
		membertest.Ready("apn1", "ap-northeast-1", m),
	}
}

// TestMaxShareCapsDepartures: while the home region has a candidate, the
// share of its requests that may leave stays at the cap, measured over the
// window, and the departures that are allowed go to the spill-over region.
func TestMaxShareCapsDepartures(t *testing.T) {
	f := plugintest.New[*Filter](t, New, `{"regions":[{"region":"us-east-1","spillOver":["eu-west-1"],"maxShare":0.25}]}`)
	states := fleet()
	left := 0
	const n = 400
	for i := range n {
		now := membertest.Now.Add(time.Duration(i) * 10 * time.Millisecond)
		c, views := membertest.Cycle(&scheduling.Request{Model: "llama"}, "us-east-1", now, states...)
		got := membertest.Names(c, f.Filter(c, views))
		switch {
		case slices.Equal(got, []string{"use1", "euw1"}):
			left++
		case !slices.Equal(got, []string{"use1"}):
			t.Fatalf("request %d kept %v: want home, or home and the first spill-over region", i, got)
		}
	}
	if share := float64(left) / n; share > 0.25 || share < 0.2 {
		t.Fatalf("%d of %d requests could leave (%.2f), want just under the cap of 0.25", left, n, share)
	}
}

// TestSpillOverOrder: with no candidate at home, requests go to the first
// region of the order that has one, and to any region when none has.
func TestSpillOverOrder(t *testing.T) {
	f := plugintest.New[*Filter](t, New, `{"regions":[{"region":"us-east-1","spillOver":["us-west-2","ap-northeast-1","eu-west-1"],"maxShare":0}]}`)
	away := fleet()[1:]
	c, views := membertest.Cycle(&scheduling.Request{Model: "llama"}, "us-east-1", membertest.Now, away...)
	if got := membertest.Names(c, f.Filter(c, views)); !slices.Equal(got, []string{"apn1"}) {
		t.Fatalf("kept %v, want apn1 (us-west-2 has no member, ap-northeast-1 comes next)", got)
	}
	f = plugintest.New[*Filter](t, New, `{"regions":[{"region":"us-east-1","spillOver":["us-west-2"]}]}`)
	c, views = membertest.Cycle(&scheduling.Request{Model: "llama"}, "us-east-1", membertest.Now, away...)
	if got := f.Filter(c, views); len(got) != 2 {
		t.Fatalf("kept %d, want both: no spill-over region has a member, so availability wins", len(got))
	}
	// A cap of 0 with a candidate at home keeps every request home.
	f = plugintest.New[*Filter](t, New, `{"regions":[{"region":"us-east-1","maxShare":0}]}`)
	c, views = membertest.Cycle(&scheduling.Request{Model: "llama"}, "us-east-1", membertest.Now, fleet()...)
	if got := membertest.Names(c, f.Filter(c, views)); !slices.Equal(got, []string{"use1"}) {
		t.Fatalf("kept %v, want use1 only", got)
	}
	// Other origins are not shaped.
	c, views = membertest.Cycle(&scheduling.Request{Model: "llama"}, "eu-west-1", membertest.Now, fleet()...)
	if got := f.Filter(c, views); len(got) != 3 {
		t.Fatalf("an unshaped origin kept %d of 3", len(got))
	}
}

func TestParameters(t *testing.T) {
	for _, bad := range []string{
		`{"regions":[{"maxShare":0.5}]}`,
		`{"regions":[{"region":"a"},{"region":"a"}]}`,
		`{"regions":[{"region":"a","spillOver":["a"]}]}`,
		`{"regions":[{"region":"a","spillOver":[""]}]}`,
		`{"regions":[{"region":"a","maxShare":1.5}]}`,
		`{"regions":[{"region":"a","maxShare":-0.1}]}`,
	} {
		if _, err := New("x", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
