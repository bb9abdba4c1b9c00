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

// On a fleet far over the bounds, the miss budget places its share of the
// requests that would be shed (1% of 250: two, the budget earned by the
// 100th and the 200th), and never a low-priority request shed for its
// priority.
func TestMissBudgetPlacesItsShareOverTheBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   float64
		priority int
		want     int
	}{
		{"1%", 0.01, 0, 2},
		{"off", 0, 0, 0},
		{"low priority", 0.01, -1, 0},
	} {
		d := newDirector(t, config.Default+fmt.Sprintf("admission: {missBudget: %v}\n", tc.budget), 2, director.Options{})
		setWaiting(d, 500, t0)
		placed, shed := 0, 0
		for i := range 250 {
			req := &scheduling.Request{Model: "m", Prompt: strings.Repeat("a", 1000) + fmt.Sprint(i), Priority: tc.priority}
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
