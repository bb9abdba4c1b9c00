package capacity

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// On a trace, capacity under SLO is a cliff: the same requests replay
// whatever the seed, and P99 over a few hundred of them turns on the few
// slowest, so one window's capacity can move by a tenth when one long prompt
// starts a little later. Windows judges each policy on several windows of
// the trace instead, each against a reference policy: the geometric mean of
// the ratios and how many windows it holds more or less than the reference.
// Even so, a window's capacity is where one request tips the P99, and a
// small change to a policy moved the geometric mean over six synthetic
// windows by a tenth either way. The misses below capacity (WindowLoads)
// count every request that missed, at loads every policy is asked to carry
// alike, so they move by requests rather than by cliffs.

// WindowReport is the capacity report of one window, starting Start (trace
// time, seconds) into the trace.
type WindowReport struct {
	Start float64 `json:"start_s"`
	Report
	// Loads are the misses at WindowLoads' loads (none when not asked).
	Loads []WindowLoad `json:"loads,omitempty"`
}

// WindowLoad is each policy's misses on a window at Load times its
// reference capacity (ReferenceScale: the oracle's), the rate multiplier
// Scale, on the first seed: the counted requests (alike for every policy)
// and those of each policy that failed or missed either SLO.
type WindowLoad struct {
	Load    float64        `json:"load"`
	Scale   float64        `json:"rate_scale"`
	Counted int            `json:"counted"`
	Missed  map[string]int `json:"missed"`
}

// WindowLoads asks RunWindows for each policy's misses at Loads (fractions
// of each window's reference capacity), drawing a progress bar labelled
// Label into Progress over the runs (nil: none).
type WindowLoads struct {
	Loads    []float64
	Progress io.Writer
	Label    string
}

// WindowsSummary is one policy's standing against the reference over the
// windows: the geometric mean of its capacity over the reference's (each
// floored at MinScale, the search's bound), and the windows where it held
// more (Above) or less (Below) than the reference.
type WindowsSummary struct {
	GeoMeanRatio float64 `json:"geomean_ratio"`
	Above        int     `json:"above"`
	Below        int     `json:"below"`
	// Missed is the policy's misses at every window's loads, of Counted
	// requests (WindowLoad; 0 when no loads were asked).
	Missed  int `json:"missed,omitempty"`
	Counted int `json:"counted,omitempty"`
}

// Windows is the capacity under SLO of successive windows of a trace
// scenario, with each policy's summary against Reference, and the loads
// the windows' misses were counted at (WindowLoad; none when not asked).
type Windows struct {
	Scenario  string                    `json:"scenario"`
	Every     float64                   `json:"every_s"`
	Reference string                    `json:"reference"`
	Loads     []float64                 `json:"loads,omitempty"`
	Windows   []WindowReport            `json:"windows"`
	Summary   map[string]WindowsSummary `json:"summary"`
}

// RunWindows searches every policy's capacity on each of windows (windows
// of one trace scenario, named, every apart: scenario.TraceWindow), all in
// one pool, then counts each policy's misses at loads. The reference of the
// summary is igw if it runs, else the first policy.
func RunWindows(ctx context.Context, b bench.Backend, name string, every time.Duration, windows []*scenario.Scenario, opts Options, loads WindowLoads) (Windows, error) {
	results, err := searchAll(ctx, b, windows, opts)
	if err != nil {
		return Windows{}, err
	}
	reports := make([]WindowReport, len(windows))
	for k, w := range windows {
		reports[k] = WindowReport{Start: w.Workload.Trace.Start.Seconds(), Report: NewReport(w, results[k])}
	}
	if err := runLoads(ctx, b, windows, reports, opts, loads); err != nil {
		return Windows{}, err
	}
	return NewWindows(name, every, reference(opts.Policies), reports), nil
}

// runLoads runs every policy on the first seed of each window at each of
// loads' fractions of the window's reference capacity, all in one pool,
// and fills the reports' Loads. A window no policy held the SLO on at any
// rate has no capacity to take a fraction of, and no loads.
func runLoads(ctx context.Context, b bench.Backend, windows []*scenario.Scenario, reports []WindowReport, opts Options, loads WindowLoads) error {
	if len(loads.Loads) == 0 {
		return nil
	}
	seed := bench.Seeds{First: opts.Seeds.First, Count: 1}
	type at struct{ window, load int }
	var jobs []bench.Job
	var where []at
	for k, w := range windows {
		ref := ReferenceScale(reports[k].Summary)
		if ref <= 0 {
			continue
		}
		for i, f := range loads.Loads {
			reports[k].Loads = append(reports[k].Loads, WindowLoad{Load: f, Scale: f * ref, Missed: map[string]int{}})
			jobs = append(jobs, bench.Jobs(w.ScaleRate(f*ref), opts.Policies, seed)...)
			for range opts.Policies {
				where = append(where, at{k, i})
			}
		}
	}
	var bar *bench.Progress
	if loads.Progress != nil {
		bar = bench.NewProgress(loads.Progress, loads.Label, len(jobs))
	}
	outcomes, err := bench.RunJobs(ctx, b, jobs, bench.RunOptions{Parallel: opts.Parallel, Progress: bar, KeepTraces: true})
	if err != nil {
		return err
	}
	for j, o := range outcomes {
		l := &reports[where[j].window].Loads[where[j].load]
		l.Counted = int(o.Metrics.Completed + o.Metrics.Failed)
		l.Missed[o.Policy] = bench.Missed(o.Trace, o.Scenario)
	}
	return nil
}

// reference is the policy the others are compared with: igw if it runs.
func reference(names []string) string {
	if slices.Contains(names, policies.IGW) || len(names) == 0 {
		return policies.IGW
	}
	return names[0]
}

// NewWindows summarises reports against reference.
func NewWindows(name string, every time.Duration, reference string, reports []WindowReport) Windows {
	w := Windows{Scenario: name, Every: every.Seconds(), Reference: reference, Windows: reports, Summary: map[string]WindowsSummary{}}
	logs := map[string][]float64{}
	for _, r := range reports {
		ref, ok := r.Summary[reference]
		if !ok {
			continue
		}
		for p, s := range r.Summary {
			sum := w.Summary[p]
			ratio := max(s.Scale, MinScale) / max(ref.Scale, MinScale)
			logs[p] = append(logs[p], math.Log(ratio))
			switch {
			case s.Scale > ref.Scale:
				sum.Above++
			case s.Scale < ref.Scale:
				sum.Below++
			}
			w.Summary[p] = sum
		}
	}
	for _, r := range reports {
		if w.Loads == nil {
			for _, l := range r.Loads { // alike on every window that has loads
				w.Loads = append(w.Loads, l.Load)
			}
		}
		for _, l := range r.Loads {
			for p, n := range l.Missed {
				sum := w.Summary[p]
				sum.Missed += n
				sum.Counted += l.Counted
				w.Summary[p] = sum
			}
		}
	}
	for p, l := range logs {
		sum := w.Summary[p]
		total := 0.0
		for _, x := range l {
			total += x
		}
		sum.GeoMeanRatio = math.Exp(total / float64(len(l)))
		w.Summary[p] = sum
	}
	return w
}

// Rows are the windows table: a row per window with each policy of order's
// capacity (median over seeds), then each policy's geometric-mean ratio to
// the reference and the windows it holds more and less than the reference.
func (w Windows) Rows(order []string) [][]string {
	var names []string
	for _, p := range order {
		if _, ok := w.Summary[p]; ok {
			names = append(names, p)
		}
	}
	rows := [][]string{append([]string{"window from"}, names...)}
	for _, r := range w.Windows {
		row := []string{fmt.Sprintf("%vs", r.Start)}
		for _, p := range names {
			row = append(row, fmt.Sprintf("%.3g", r.Summary[p].Scale))
		}
		rows = append(rows, row)
	}
	ratio := []string{"vs " + w.Reference + " (geometric mean)"}
	counts := []string{"windows above / below " + w.Reference}
	for _, p := range names {
		s := w.Summary[p]
		ratio = append(ratio, fmt.Sprintf("%.3f×", s.GeoMeanRatio))
		counts = append(counts, fmt.Sprintf("%d / %d", s.Above, s.Below))
	}
	rows = append(rows, ratio, counts)
	if len(w.Loads) == 0 {
		return rows
	}
	of := "the oracle's capacity"
	if !slices.Contains(names, policies.Oracle) {
		of = "the largest capacity"
	}
	misses := []string{fmt.Sprintf("missed at %s× %s", joinLoads(w.Loads), of)}
	for _, p := range names {
		s := w.Summary[p]
		misses = append(misses, fmt.Sprintf("%d (%.1f%%)", s.Missed, 100*float64(s.Missed)/float64(max(s.Counted, 1))))
	}
	return append(rows, misses)
}

// joinLoads is loads as "0.85, 0.95".
func joinLoads(loads []float64) string {
	parts := make([]string, len(loads))
	for i, f := range loads {
		parts[i] = fmt.Sprint(f)
	}
	return strings.Join(parts, ", ")
}

// WriteTable prints the windows table aligned, with a title.
func (w Windows) WriteTable(out io.Writer, title string, order []string) error {
	return writeRows(out, title, w.Rows(order))
}

// Markdown writes the windows table as a Markdown table.
func (w Windows) Markdown(out io.Writer, order []string) { markdownRows(out, w.Rows(order)) }
