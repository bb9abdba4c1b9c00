package errorrate

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
)

func TestLargerOfReportedAndObserved(t *testing.T) {
	reported := membertest.Ready("reported", "r", membertest.Model("m"))
	reported.Summary.ErrorRate, reported.Summary.Requests = 0.2, 100
	observed := membertest.Ready("observed", "r", membertest.Model("m"))
	observed.Summary.ErrorRate, observed.Summary.Requests = 0.1, 100
	observed.Health.ErrorRate, observed.Health.Requests = 0.3, 50
	few := membertest.Ready("few", "r", membertest.Model("m"))
	few.Health.ErrorRate, few.Health.Requests = 0.5, 2
	s, _ := New(Type, nil)
	c, views := membertest.Decide(&scheduling.Request{Model: "m"}, reported, observed, few)
	got := plugintest.Scores(s.(*Scorer), c, views)
	if got[0] != 0.8 || got[1] != 0.7 || got[2] != 1 {
		t.Fatalf("scores %v, want [0.8 0.7 1]", got)
	}
	strict, _ := New(Type, scheduling.Parameters(`{"minRequests":1}`))
	if got := plugintest.Scores(strict.(*Scorer), c, views); got[2] != 0.5 {
		t.Fatalf("with minRequests 1, two requests of which one failed score %v", got[2])
	}
	if _, err := New(Type, scheduling.Parameters(`{"minRequests":0}`)); err == nil {
		t.Fatal("minRequests 0 accepted")
	}
}
