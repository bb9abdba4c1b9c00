package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// RecoveryWindow is how soon after an outage ends the member must take its
// share again, and the window whose P99 TTFT is held to the steady state's.
const RecoveryWindow = 30 * time.Second

// OutageReport is what one run did around one member's outage.
type OutageReport struct {
	Policy  string
	Seed    uint64
	Cluster string
	// Start and End bound the outage (run time).
	Start, End time.Duration
	// Points are one per second of arrivals from the end of the warmup.
	Points []TimelinePoint
	// OffAfter is the time from Start to the last send to the member while
	// it was down (0: none after Start).
	OffAfter time.Duration
	// BackAfter is the time from End to the first second in which the member
	// took at least half its steady share of sends (-1: not in the run).
	BackAfter time.Duration
	// SteadyShare is the member's share of sends over [warmup, Start).
	SteadyShare float64
	// SteadyP99 and RecoveryP99 are the P99 TTFT (s) of requests arriving in
	// [warmup, Start) and in [End, End+RecoveryWindow).
	SteadyP99, RecoveryP99 float64
	// ErrorsWithoutFirstByte counts requests the client saw fail with no
	// byte of a response; Cut those broken off after it by the outage.
	ErrorsWithoutFirstByte, Cut int
}

// TimelinePoint is one second of a run.
type TimelinePoint struct {
	// At is the second's start (s since the run began).
	At float64
	// Share is the member's share of the sends made in the second.
	Share float64
	// P99 is the P99 TTFT (s) of the requests arriving in the second that
	// got a first token.
	P99      float64
	Requests int
}

// Outages reports every outage of sc in the run o (which kept its trace).
func Outages(o Outcome, sc *scenario.Scenario) []OutageReport {
	var out []OutageReport
	for _, og := range sc.Outages {
		cluster := slices.IndexFunc(sc.Clusters, func(c scenario.Cluster) bool { return c.Name == og.Cluster })
		out = append(out, outageReport(o, sc, cluster, og))
	}
	return out
}

func outageReport(o Outcome, sc *scenario.Scenario, cluster int, og scenario.Outage) OutageReport {
	rep := OutageReport{Policy: o.Policy, Seed: o.Seed, Cluster: og.Cluster, Start: og.At, End: og.At + og.For, BackAfter: -1}
	seconds := int((sc.Duration - sc.Warmup).Seconds())
	sends, toMember := make([]int, seconds), make([]int, seconds)
	ttfts := make([][]float64, seconds)
	var steady, recovery []float64
	steadySends, steadyToMember := 0, 0
	for i := range o.Trace.Records {
		r := &o.Trace.Records[i]
		if r.Failed && !r.Cut {
			rep.ErrorsWithoutFirstByte++
		}
		if r.Cut {
			rep.Cut++
		}
		for _, s := range r.Sends {
			if s.Cluster == cluster && s.At >= rep.Start && s.At < rep.End {
				rep.OffAfter = max(rep.OffAfter, s.At-rep.Start)
			}
			if s.At >= sc.Warmup && s.At < rep.Start {
				steadySends++
				if s.Cluster == cluster {
					steadyToMember++
				}
			}
			if k := int((s.At - sc.Warmup) / time.Second); s.At >= sc.Warmup && k < seconds {
				sends[k]++
				if s.Cluster == cluster {
					toMember[k]++
				}
			}
		}
		if r.FirstToken == 0 || r.Arrival < sc.Warmup {
			continue
		}
		ttft := (r.FirstToken - r.Arrival).Seconds()
		if k := int((r.Arrival - sc.Warmup) / time.Second); k < seconds {
			ttfts[k] = append(ttfts[k], ttft)
		}
		switch {
		case r.Arrival < rep.Start:
			steady = append(steady, ttft)
		case r.Arrival >= rep.End && r.Arrival < rep.End+RecoveryWindow:
			recovery = append(recovery, ttft)
		}
	}
	if steadySends > 0 {
		rep.SteadyShare = float64(steadyToMember) / float64(steadySends)
	}
	for k := range seconds {
		p := TimelinePoint{At: (sc.Warmup + time.Duration(k)*time.Second).Seconds(), Requests: len(ttfts[k])}
		if sends[k] > 0 {
			p.Share = float64(toMember[k]) / float64(sends[k])
		}
		slices.Sort(ttfts[k])
		p.P99 = Percentile(ttfts[k], 99)
		rep.Points = append(rep.Points, p)
		at := sc.Warmup + time.Duration(k)*time.Second
		if rep.BackAfter < 0 && at >= rep.End && rep.SteadyShare > 0 && p.Share >= rep.SteadyShare/2 {
			rep.BackAfter = at + time.Second - rep.End // the second is done by then
		}
	}
	slices.Sort(steady)
	slices.Sort(recovery)
	rep.SteadyP99, rep.RecoveryP99 = Percentile(steady, 99), Percentile(recovery, 99)
	return rep
}

// WriteOutageTable prints one row per report.
func WriteOutageTable(w io.Writer, title string, reps []OutageReport) error {
	if title != "" {
		fmt.Fprintln(w, title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tseed\tcluster\toutage\toff after (s)\tback after (s)\tsteady share\tsteady P99 (s)\trecovery P99 (s)\trecovery/steady\terrors w/o first byte\tcut after first byte\t")
	for _, r := range reps {
		back := "never"
		if r.BackAfter >= 0 {
			back = fmt.Sprintf("%.1f", r.BackAfter.Seconds())
		}
		ratio := "–"
		if r.SteadyP99 > 0 {
			ratio = fmt.Sprintf("%.2f×", r.RecoveryP99/r.SteadyP99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v–%v\t%.2f\t%s\t%.1f%%\t%.3f\t%.3f\t%s\t%d\t%d\t\n", r.Policy, r.Seed, r.Cluster, r.Start, r.End,
			r.OffAfter.Seconds(), back, 100*r.SteadyShare, r.SteadyP99, r.RecoveryP99, ratio, r.ErrorsWithoutFirstByte, r.Cut)
	}
	return tw.Flush()
}
