// Package plots draws the benchmark's PNG figures with gonum/plot: the TTFT
// distribution of each policy on one scenario, P99 TTFT by scenario, a
// load sweep (TTFT and goodput against offered load), capacity under SLO by
// trace window, and a member cluster's outage timeline.
// Both use logarithmic time axes: load-blind policies are orders of magnitude
// slower than the rest when a fleet overloads.
package plots

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	spanEmptyLogAxes(p)
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
	spanEmptyLogAxes(p)
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}

func style(ls *draw.LineStyle, i int) {
	ls.Color = plotutil.Color(i)
	ls.Dashes = plotutil.Dashes(i / len(plotutil.SoftColors))
	ls.Width = vg.Points(1.5)
}

// LoadSeries is one policy's figures at each offered load of a sweep.
type LoadSeries struct {
	Policy string
	// Load is the offered requests per second; P50, P99 (TTFT, s) and
	// Goodput (req/s) are per load.
	Load, P50, P99, Goodput []float64
}

// LoadSweep writes two panels side by side to path: TTFT P99 (solid) and P50
// (dotted) on a log axis, and goodput, each against the offered load.
func LoadSweep(path, title string, series []LoadSeries) error {
	ttft, good := plot.New(), plot.New()
	ttft.Title.Text, good.Title.Text = title, "goodput (requests meeting the SLO)"
	ttft.X.Label.Text, good.X.Label.Text = "offered load (req/s)", "offered load (req/s)"
	ttft.Y.Label.Text, good.Y.Label.Text = "TTFT (s, log): P99 solid, P50 dotted", "goodput (req/s)"
	ttft.Y.Scale, ttft.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	ttft.Legend.Top, ttft.Legend.Left = true, true
	for _, p := range []*plot.Plot{ttft, good} {
		p.Add(plotter.NewGrid())
	}
	xys := func(xs, ys []float64, floorAt float64) plotter.XYs {
		out := make(plotter.XYs, len(xs))
		for i := range xs {
			out[i] = plotter.XY{X: xs[i], Y: math.Max(ys[i], floorAt)}
		}
		return out
	}
	for i, s := range series {
		p99, err := plotter.NewLine(xys(s.Load, s.P99, floor))
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		p50, err := plotter.NewLine(xys(s.Load, s.P50, floor))
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		g, err := plotter.NewLine(xys(s.Load, s.Goodput, math.Inf(-1)))
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		for _, l := range []*plotter.Line{p99, p50, g} {
			l.LineStyle.Color = plotutil.Color(i)
			l.LineStyle.Width = vg.Points(1.5)
		}
		p50.LineStyle.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		ttft.Add(p99, p50)
		good.Add(g)
		ttft.Legend.Add(s.Policy, p99)
	}
	return writePanels(path, 12*vg.Inch, 4.5*vg.Inch, [][]*plot.Plot{{ttft, good}})
}

// CapacityByWindow writes each policy's capacity under SLO (one value per
// window, series in the order of starts) against the window's start in the
// trace (s) to path, as lines with points on a log axis: a quiet window's
// capacity can be tens of times a busy one's. Values must be positive.
func CapacityByWindow(path, title string, starts []float64, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "window start in the trace (s)"
	p.Y.Label.Text = "capacity under SLO (× the window's rate, log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, s := range series {
		xys := make(plotter.XYs, len(s.Values))
		for k, v := range s.Values {
			xys[k] = plotter.XY{X: starts[k], Y: v}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		style(&line.LineStyle, i)
		points.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(2.5), Shape: plotutil.Shape(i)}
		p.Add(line, points)
		p.Legend.Add(s.Policy, line, points)
	}
	spanEmptyLogAxes(p)
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}

// spanEmptyLogAxes gives each log axis of p that holds no data [floor, 1]:
// left empty (a grid run for policies that have no figure there), it spans
// [-1, 1] and drawing it panics.
func spanEmptyLogAxes(p *plot.Plot) {
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		if _, isLog := a.Scale.(plot.LogScale); isLog && !(a.Min <= a.Max) {
			a.Min, a.Max = floor, 1
		}
	}
}

// writePanels draws a grid of plots (rows of columns) into one PNG at path.
func writePanels(path string, w, h vg.Length, panels [][]*plot.Plot) error {
	for _, row := range panels {
		for _, p := range row {
			spanEmptyLogAxes(p)
		}
	}
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: len(panels[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4}
	canvases := plot.Align(panels, tiles, dc)
	for i, row := range panels {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TimelineSeries is one policy's outage timeline: per second, the member's
// share of the hub's sends and the P99 TTFT of the second's arrivals.
type TimelineSeries struct {
	Policy          string
	At, Share, P99s []float64
}

// OutageTimeline writes two panels, one above the other, to path: the
// member's share of the sends, and P99 TTFT (log), each per second, with
// the outage [start, end] (s) marked by grey lines.
func OutageTimeline(path, title string, start, end float64, series []TimelineSeries) error {
	share, ttft := plot.New(), plot.New()
	share.Title.Text = title
	share.Y.Label.Text, ttft.Y.Label.Text = "share of requests sent to the member", "P99 TTFT per second (s, log)"
	share.X.Label.Text, ttft.X.Label.Text = "time (s)", "time (s)"
	share.Y.Min, share.Y.Max = 0, 1
	ttft.Y.Scale, ttft.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	share.Legend.Top = true
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		sh, p99 := make(plotter.XYs, len(s.At)), make(plotter.XYs, len(s.At))
		for k, at := range s.At {
			sh[k] = plotter.XY{X: at, Y: s.Share[k]}
			p99[k] = plotter.XY{X: at, Y: math.Max(s.P99s[k], floor)}
			lo, hi = math.Min(lo, p99[k].Y), math.Max(hi, p99[k].Y)
		}
		a, err := plotter.NewLine(sh)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		b, err := plotter.NewLine(p99)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Policy, err)
		}
		style(&a.LineStyle, i)
		style(&b.LineStyle, i)
		share.Add(a)
		ttft.Add(b)
		share.Legend.Add(s.Policy, a)
	}
	for _, p := range []*plot.Plot{share, ttft} {
		p.Add(plotter.NewGrid())
		ylo, yhi := 0.0, 1.0
		if p == ttft {
			ylo, yhi = lo, hi
		}
		for _, x := range []float64{start, end} {
			if math.IsInf(ylo, 0) {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: ylo}, {X: x, Y: yhi}})
			if err != nil {
				return err
			}
			l.LineStyle.Color = color.Gray{Y: 128}
			l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
		}
	}
	return writePanels(path, 12*vg.Inch, 8*vg.Inch, [][]*plot.Plot{{share}, {ttft}})
}
