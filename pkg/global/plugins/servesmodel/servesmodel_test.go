package servesmodel

import (
	"slices"
	"strings"
	"testing"
	"time"

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
		membertest.Member("a", "r", withAdapter, time.Millisecond, membertest.Now),
		membertest.Member("b", "r", membertest.Model("llama"), time.Millisecond, membertest.Now),
		membertest.Member("c", "r", nil, time.Millisecond, membertest.Now),
		membertest.Member("d", "r", noReady, time.Millisecond, membertest.Now),
	}
	c, views := membertest.Cycle(&scheduling.Request{Model: "llama"}, "", membertest.Now, states...)
	if got := membertest.Names(c, f.(scheduling.Filter).Filter(c, views)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("base model kept %v", got)
	}
	c, views = membertest.Cycle(&scheduling.Request{Model: "llama", Adapter: "sql"}, "", membertest.Now, states...)
	if got := membertest.Names(c, f.(scheduling.Filter).Filter(c, views)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("adapter kept %v", got)
	}
	c, views = membertest.Cycle(&scheduling.Request{Model: "llama", Adapter: "chat"}, "", membertest.Now, states...)
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
