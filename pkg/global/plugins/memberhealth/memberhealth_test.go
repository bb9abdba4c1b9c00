package memberhealth

import (
	"slices"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
)

func members(h ...health.Status) []member.State {
	out := make([]member.State, len(h))
	for i, st := range h {
		out[i] = membertest.Ready(string(rune('a'+i)), "r", membertest.Model("m"))
		out[i].Health = st
	}
	return out
}

func TestDropsMembersOutOfRotation(t *testing.T) {
	f, _ := New(Type, nil)
	out := health.Status{Reason: "2 consecutive failed summary fetches (last: timeout)"}
	c, views := membertest.Decide(&scheduling.Request{Model: "m"}, members(membertest.Healthy, out, membertest.Healthy)...)
	if got := membertest.Names(c, f.(scheduling.Filter).Filter(c, views)); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("kept %v", got)
	}
	c, views = membertest.Decide(&scheduling.Request{Model: "m"}, members(out, out)...)
	if got := f.(scheduling.Filter).Filter(c, views); len(got) != 0 {
		t.Fatalf("kept %d out of rotation", len(got))
	}
	if r := member.From(c).Rejection(); !strings.HasPrefix(r, "no member cluster is in rotation: a 2 consecutive failed summary fetches") || !strings.Contains(r, "; b 2 consecutive") {
		t.Fatalf("reason %q", r)
	}
}

// TestSlowStartShare: a member at weight 0.25 beside a healthy one stays a
// candidate in about a quarter of the decisions; alone, it is always kept.
func TestSlowStartShare(t *testing.T) {
	f, _ := New(Type, nil)
	warm := health.Status{InRotation: true, Weight: 0.25}
	kept := 0
	const n = 4000
	c, views := membertest.Decide(&scheduling.Request{Model: "m"}, members(membertest.Healthy, warm)...)
	for range n { // one cycle, so one random source across the decisions
		if got := f.(scheduling.Filter).Filter(c, slices.Clone(views)); len(got) == 2 {
			kept++
		}
	}
	if share := float64(kept) / n; share < 0.22 || share > 0.28 {
		t.Fatalf("kept the warming member in %.3f of decisions, want about 0.25", share)
	}
	for range 100 {
		c, views := membertest.Decide(&scheduling.Request{Model: "m"}, members(warm)...)
		if got := f.(scheduling.Filter).Filter(c, views); len(got) != 1 {
			t.Fatal("a member in slow start, the only one in rotation, was dropped")
		}
	}
}
