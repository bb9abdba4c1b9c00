package capacity

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
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

// WindowReport is the capacity report of one window, starting Start (trace
// time, seconds) into the trace.
type WindowReport struct {
	Start float64 `json:"start_s"`
	Report
}

// WindowsSummary is one policy's standing against the reference over the
// windows: the geometric mean of its capacity over the reference's (each
// floored at MinScale, the search's bound), and the windows where it held
// more (Above) or less (Below) than the reference.
type WindowsSummary struct {
	GeoMeanRatio float64 `json:"geomean_ratio"`
	Above        int     `json:"above"`
	Below        int     `json:"below"`
}

// Windows is the capacity under SLO of successive windows of a trace
// scenario, with each policy's summary against Reference.
type Windows struct {
	Scenario  string                    `json:"scenario"`
	Every     float64                   `json:"every_s"`
	Reference string                    `json:"reference"`
	Windows   []WindowReport            `json:"windows"`
	Summary   map[string]WindowsSummary `json:"summary"`
}

// RunWindows searches every policy's capacity on each of windows (windows
// of one trace scenario, named, every apart: scenario.TraceWindow), all in
// one pool. The reference of the summary is igw if it runs, else the first
// policy.
func RunWindows(ctx context.Context, b bench.Backend, name string, every time.Duration, windows []*scenario.Scenario, opts Options) (Windows, error) {
	results, err := searchAll(ctx, b, windows, opts)
	if err != nil {
		return Windows{}, err
	}
	reports := make([]WindowReport, len(windows))
	for k, w := range windows {
		reports[k] = WindowReport{Start: w.Workload.Trace.Start.Seconds(), Report: NewReport(w, results[k])}
	}
	return NewWindows(name, every, reference(opts.Policies), reports), nil
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
	return append(rows, ratio, counts)
}

// WriteTable prints the windows table aligned, with a title.
func (w Windows) WriteTable(out io.Writer, title string, order []string) error {
	return writeRows(out, title, w.Rows(order))
}

// Markdown writes the windows table as a Markdown table.
func (w Windows) Markdown(out io.Writer, order []string) { markdownRows(out, w.Rows(order)) }
