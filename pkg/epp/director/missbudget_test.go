package director_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// nearBound waiting requests put every endpoint's start for a 1,000-byte
// prompt between the wait bound and the first-token budget.
const nearBound = 130

// On a fleet over the wait bound (1.5 s) but whose soonest start is within
// the 2 s first-token budget, the miss budget places its share of the
// requests that would be shed: the eight it starts with, then 1% of 250
// (two, earned by the 100th and the 200th after them); never a low-priority
// request shed for its priority, nor one whose first token would come past
// the budget anyway.
func TestMissBudgetPlacesItsShareOverTheBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   float64
		priority int
		waiting  int
		want     int
	}{
		{"1%", 0.01, 0, nearBound, 10},
		{"off", 0, 0, nearBound, 0},
		{"low priority", 0.01, -1, nearBound, 0},
		{"past the first-token budget", 0.01, 0, 500, 0},
	} {
		d := newDirector(t, config.Default+fmt.Sprintf("admission: {missBudget: %v}\n", tc.budget), 2, director.Options{})
		setWaiting(d, tc.waiting, t0)
		placed, shed := 0, 0
		for i := range 250 {
			// Prompts share no prefix: cached prefixes would shrink the
			// mean prompt the endpoints' waiting requests are costed at.
			req := &scheduling.Request{Model: "m", Prompt: fmt.Sprintf("%04d", i) + strings.Repeat("a", 1000), Priority: tc.priority}
			res, err := d.Schedule(context.Background(), req, false, t0)
			switch {
			case err == nil && res.Reason == director.ReasonOverBounds:
				placed++
			case err != nil && err.Status == 429 && res.Reason == director.ReasonShed:
				shed++
			default:
				t.Fatalf("%s: request %d: %v %v", tc.name, i, res.Reason, err)
			}
		}
		if placed != tc.want || shed != 250-tc.want {
			t.Errorf("%s: %d placed over the bounds and %d shed, want %d placed", tc.name, placed, shed, tc.want)
		}
	}
}
