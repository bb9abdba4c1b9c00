package servesmodel

import (
	"slices"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
)

func TestKeepsMembersThatServeTheModel(t *testing.T) {
	f, _ := New(Type, nil)
	withAdapter, noReady := membertest.Model("llama"), membertest.Model("llama")
	withAdapter.Adapters = []string{"sql"}
	noReady.ReadyEndpoints, noReady.Endpoints = 0, 3
	states := []member.State{
		membertest.Ready("a", "r", withAdapter),
		membertest.Ready("b", "r", membertest.Model("llama")),
		membertest.Ready("c", "r", nil),
		membertest.Ready("d", "r", noReady),
	}
	c, views := membertest.Decide(&scheduling.Request{Model: "llama"}, states...)
	if got := membertest.Names(c, f.(scheduling.Filter).Filter(c, views)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("base model kept %v", got)
	}
	c, views = membertest.Decide(&scheduling.Request{Model: "llama", Adapter: "sql"}, states...)
	if got := membertest.Names(c, f.(scheduling.Filter).Filter(c, views)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("adapter kept %v", got)
	}
	c, views = membertest.Decide(&scheduling.Request{Model: "llama", Adapter: "chat"}, states...)
	if got := f.(scheduling.Filter).Filter(c, views); len(got) != 0 {
		t.Fatalf("unknown adapter kept %d", len(got))
	}
	r := member.From(c).Rejection()
	for _, want := range []string{"no member cluster serves model llama with adapter chat", "a does not list adapter chat", "c has no summary", "d has no ready endpoint (3 known)"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason %q lacks %q", r, want)
		}
	}
}
