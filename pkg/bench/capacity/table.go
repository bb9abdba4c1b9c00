package capacity

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/igw-dev/igw/pkg/bench/policies"
)

// Rows are the capacity table: a header and one row per policy of order that
// the report holds, with each policy's capacity (median over seeds), the
// offered rate there, and its ratios to the oracle and to the best peer.
func (r Report) Rows(order []string) [][]string {
	rows := [][]string{{"policy", "capacity (× rate)", "req/s", "vs oracle", "vs best peer"}}
	oracle, hasOracle := r.Summary[policies.Oracle]
	if !hasOracle {
		oracle, hasOracle = r.Summary[policies.GlobalOracle]
	}
	best := BestPeer(r.Summary)
	ratio := func(v float64, to Summary, ok bool) string {
		if !ok || to.Scale == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v/to.Scale)
	}
	for _, p := range order {
		s, ok := r.Summary[p]
		if !ok {
			continue
		}
		name := p
		if p == best {
			name += " (best peer)"
		}
		rows = append(rows, []string{name, fmt.Sprintf("%.3g", s.Scale), fmt.Sprintf("%.2f", s.ReqPerS),
			ratio(s.Scale, oracle, hasOracle), ratio(s.Scale, r.Summary[best], best != "")})
	}
	return rows
}

// WriteTable prints the capacity table aligned, with a title.
func (r Report) WriteTable(w io.Writer, title string, order []string) error {
	return writeRows(w, title, r.Rows(order))
}

// Markdown writes the capacity table as a Markdown table.
func (r Report) Markdown(w io.Writer, order []string) { markdownRows(w, r.Rows(order)) }

// writeRows prints rows (the first a header) aligned right, after a title.
func writeRows(w io.Writer, title string, rows [][]string) error {
	if title != "" {
		fmt.Fprintln(w, title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// markdownRows writes rows (the first a header) as a Markdown table, the
// first column left-aligned and the others right.
func markdownRows(w io.Writer, rows [][]string) {
	for i, row := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---:|", len(row)-1))
		}
	}
}
