package proximity

import (
	"math"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/wire"
)

func TestNearerRegionScoresHigher(t *testing.T) {
	p, err := New(Type, scheduling.Parameters(`{"delays":[{"from":"us-east-1","to":"eu-west-1","delay":"40ms"},{"from":"us-east-1","to":"ap-south-1","delay":"95ms"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*Scorer)
	m := membertest.Model("m")
	use := membertest.Ready("use1", "us-east-1", m)
	euw := membertest.Ready("euw1", "eu-west-1", m)
	aps := membertest.Ready("aps1", "ap-south-1", m)
	c, views := membertest.Cycle(&scheduling.Request{Model: "m"}, "us-east-1", membertest.Now, use, euw, aps)
	got := plugintest.Scores(s, c, views)
	want := []float64{1, 0.006 / 0.045, 0.006 / 0.1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("from the hub's region: %v, want %v", got, want)
		}
	}
	// The edge's header wins over the hub's region; delays are symmetric;
	// unlisted pairs are 100 ms away.
	c, views = membertest.Cycle(&scheduling.Request{Model: "m", Headers: map[string]string{wire.HeaderClientRegion: "eu-west-1"}}, "us-east-1", membertest.Now, use, euw, aps)
	got = plugintest.Scores(s, c, views)
	if want := []float64{0.006 / 0.045, 1, 0.006 / 0.105}; math.Abs(got[0]-want[0]) > 1e-9 || got[1] != 1 || math.Abs(got[2]-want[2]) > 1e-9 {
		t.Fatalf("from eu-west-1: %v, want %v", got, want)
	}
}

func TestParameters(t *testing.T) {
	for _, bad := range []string{
		`{"delays":[{"from":"a","delay":"1ms"}]}`,
		`{"delays":[{"from":"a","to":"b","delay":"1ms"},{"from":"b","to":"a","delay":"2ms"}]}`,
		`{"delays":[{"from":"a","to":"b","delay":40}]}`,
		`{"sameRegion":"-1ms"}`,
		`{"unknown":"far"}`,
	} {
		if _, err := New(Type, scheduling.Parameters(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
