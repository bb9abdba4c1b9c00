package grid

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/plots"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

func outageFile(scenario string) string { return "outage-" + scenario + ".png" }

// writeOutage draws the timeline of the first outage, seed 1 of each global
// policy.
func writeOutage(dir string, sc *scenario.Scenario, reps []bench.OutageReport) error {
	og := sc.Outages[0]
	var series []plots.TimelineSeries
	for _, r := range reps {
		if r.Seed != 1 || r.Cluster != og.Cluster || r.Start != og.At {
			continue
		}
		ts := plots.TimelineSeries{Policy: r.Policy}
		for _, p := range r.Points {
			ts.At, ts.Share, ts.P99s = append(ts.At, p.At), append(ts.Share, p.Share), append(ts.P99s, p.P99)
		}
		series = append(series, ts)
	}
	return plots.OutageTimeline(filepath.Join(dir, outageFile(sc.Name)),
		fmt.Sprintf("%s: cluster %s unreachable %v–%v (seed 1)", sc.Name, og.Cluster, og.At, og.At+og.For),
		og.At.Seconds(), (og.At + og.For).Seconds(), series)
}

// outagePage is the outage table (every policy and seed) and the timeline.
func outagePage(w *strings.Builder, sc *scenario.Scenario, reps []bench.OutageReport) {
	fmt.Fprintf(w, "\nOutages: *off after* is the time from the member's death to the hub's last send to it; *back after* the time "+
		"from its return to the first second in which it takes half its steady share of the sends; *recovery P99* is over "+
		"the %v after its return. *cut* requests broke off after their first byte when the member died (no router can "+
		"save them); *errors w/o first byte* must be 0.\n\n```\n", bench.RecoveryWindow)
	_ = bench.WriteOutageTable(w, "", reps)
	fmt.Fprintf(w, "```\n\n![%s outage timeline](%s)\n", sc.Name, outageFile(sc.Name))
}
