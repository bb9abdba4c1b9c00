package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// Report is the benchmark contract's JSON object for one scenario.
type Report struct {
	Scenario string             `json:"scenario"`
	Mode     string             `json:"mode"`
	Results  []Result           `json:"results"`
	Summary  map[string]Metrics `json:"summary"`
}

// Result is one policy and seed's metrics.
type Result struct {
	Policy string `json:"policy"`
	Seed   uint64 `json:"seed"`
	Metrics
}

// NewReport builds the report of one scenario's outcomes.
func NewReport(scenario, mode string, outcomes []Outcome) Report {
	r := Report{Scenario: scenario, Mode: mode, Results: make([]Result, 0, len(outcomes)), Summary: Summarize(outcomes)}
	for _, o := range outcomes {
		r.Results = append(r.Results, Result{Policy: o.Policy, Seed: o.Seed, Metrics: o.Metrics})
	}
	return r
}

// Column is one metric as tables show it.
type Column struct {
	Header string
	// Field points at the column's metric.
	Field func(*Metrics) *float64
	// Format renders a value.
	Format func(float64) string
	// LowerIsBetter says which way a ratio improves.
	LowerIsBetter bool
}

// Value is the column's metric in m.
func (c Column) Value(m *Metrics) float64 { return *c.Field(m) }

func seconds(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func milliseconds(v float64) string { return fmt.Sprintf("%.1f", v*1000) }
func whole(v float64) string        { return fmt.Sprintf("%.0f", v) }
func fraction(v float64) string     { return fmt.Sprintf("%.1f%%", v*100) }
func rate(v float64) string         { return fmt.Sprintf("%.2f", v) }

// Columns are the contract's metrics, in table order.
var Columns = []Column{
	{"TTFT p50 (s)", func(m *Metrics) *float64 { return &m.TTFTP50 }, seconds, true},
	{"TTFT p95 (s)", func(m *Metrics) *float64 { return &m.TTFTP95 }, seconds, true},
	{"TTFT p99 (s)", func(m *Metrics) *float64 { return &m.TTFTP99 }, seconds, true},
	{"TPOT p50 (ms)", func(m *Metrics) *float64 { return &m.TPOTP50 }, milliseconds, true},
	{"TPOT p99 (ms)", func(m *Metrics) *float64 { return &m.TPOTP99 }, milliseconds, true},
	{"e2e p99 (s)", func(m *Metrics) *float64 { return &m.E2EP99 }, seconds, true},
	{"output tok/s", func(m *Metrics) *float64 { return &m.OutputTokPerS }, whole, false},
	{"completed", func(m *Metrics) *float64 { return &m.Completed }, whole, false},
	{"failed", func(m *Metrics) *float64 { return &m.Failed }, whole, true},
	{"cut by outage", func(m *Metrics) *float64 { return &m.CutByOutage }, whole, true},
	{"goodput (req/s)", func(m *Metrics) *float64 { return &m.Goodput }, rate, false},
	{"prefix hit", func(m *Metrics) *float64 { return &m.PrefixHitRate }, fraction, false},
	{"LoRA loads", func(m *Metrics) *float64 { return &m.LoRALoads }, whole, true},
	{"min pod share", func(m *Metrics) *float64 { return &m.MinPodShare }, rate, false},
}

// WriteTable prints the summary as an aligned text table, policies in order.
func WriteTable(w io.Writer, title string, summary map[string]Metrics, policies []string) error {
	if title != "" {
		fmt.Fprintln(w, title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"policy"}
	for _, c := range Columns {
		head = append(head, c.Header)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, p := range policies {
		m, ok := summary[p]
		if !ok {
			continue
		}
		row := []string{p}
		for _, c := range Columns {
			row = append(row, c.Format(c.Value(&m)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// WriteJSON saves v as indented JSON in file.
func WriteJSON(file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(data, '\n'), 0o644)
}
