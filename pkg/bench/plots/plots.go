// Package plots draws the benchmark's PNG figures with gonum/plot: the TTFT
// distribution of each policy on one scenario, and P99 TTFT by scenario.
// Both use logarithmic time axes: load-blind policies are orders of magnitude
// slower than the rest when a fleet overloads.
package plots

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one policy's values.
type Series struct {
	Policy string
	// Values: sorted TTFTs in seconds (CDF), or one value per scenario (P99).
	Values []float64
}

// floor keeps zero and sub-millisecond values plottable on a log axis.
const floor = 1e-3

// maxCDFPoints bounds each CDF line (the figure is a few hundred pixels wide).
const maxCDFPoints = 400

// TTFTCDF writes the empirical CDF of each series' sorted TTFTs to path.
func TTFTCDF(path, title string, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time to first token (s, log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = -vg.Millimeter
	p.Add(plotter.NewGrid())
	for i, s := range series {
		n := len(s.Values)
		if n == 0 {
			continue
		}
		step := max(1, n/maxCDFPoints)
		var xys plotter.XYs
		for k := 0; k < n; k += step {
			xys = append(xys, plotter.XY{X: math.Max(s.Values[k], floor), Y: float64(k+1) / float64(n)})
		}
		xys = append(xys, plotter.XY{X: math.Max(s.Values[n-1], floor), Y: 1})
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		style(&line.LineStyle, i)
		p.Add(line)
		p.Legend.Add(s.Policy, line)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// P99ByScenario writes each policy's P99 TTFT per scenario to path.
func P99ByScenario(path, title string, scenarios []string, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "P99 time to first token (s, log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.NominalX(scenarios...)
	p.X.Min, p.X.Max = -0.5, float64(len(scenarios))-0.5
	p.Legend.Top = true
	p.Legend.Left = true
	spread := 0.6 / float64(max(len(series), 1))
	for i, s := range series {
		var xys plotter.XYs
		for k, v := range s.Values {
			xys = append(xys, plotter.XY{X: float64(k) - 0.3 + spread*(float64(i)+0.5), Y: math.Max(v, floor)})
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(3.5), Shape: plotutil.Shape(i)}
		p.Add(sc)
		p.Legend.Add(s.Policy, sc)
	}
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}

func style(ls *draw.LineStyle, i int) {
	ls.Color = plotutil.Color(i)
	ls.Dashes = plotutil.Dashes(i / len(plotutil.SoftColors))
	ls.Width = vg.Points(1.5)
}
