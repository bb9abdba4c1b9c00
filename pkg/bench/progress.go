package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress draws one bar for a set of jobs on a terminal (redrawn in place),
// or a line per tenth done elsewhere. A nil *Progress draws nothing.
type Progress struct {
	w        io.Writer
	label    string
	tty      bool
	start    time.Time
	mu       sync.Mutex
	fraction []float64
	done     int
	drawn    time.Time
	tenths   int
}

// NewProgress returns a bar for n jobs written to w; it draws in place when w
// is a terminal.
func NewProgress(w io.Writer, label string, n int) *Progress {
	p := &Progress{w: w, label: label, start: time.Now(), fraction: make([]float64, n)}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Job returns the progress callback of job i.
func (p *Progress) Job(i int) func(float64) {
	if p == nil {
		return nil
	}
	return func(f float64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.fraction[i] = min(max(f, 0), 1)
		p.drawLocked(false)
	}
}

// Done marks job i finished.
func (p *Progress) Done(i int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fraction[i] = 1
	p.done++
	p.drawLocked(false)
}

// Finish draws the final state and ends the line.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked(true)
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func (p *Progress) drawLocked(force bool) {
	total := 0.0
	for _, f := range p.fraction {
		total += f
	}
	frac := total / float64(max(len(p.fraction), 1))
	elapsed := time.Since(p.start).Truncate(time.Second)
	if !p.tty {
		if t := int(frac * 10); t > p.tenths || force {
			p.tenths = t
			fmt.Fprintf(p.w, "%s: %3.0f%% (%d/%d runs, %v)\n", p.label, frac*100, p.done, len(p.fraction), elapsed)
		}
		return
	}
	if !force && time.Since(p.drawn) < 200*time.Millisecond {
		return
	}
	p.drawn = time.Now()
	const width = 30
	filled := int(frac * width)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %d/%d runs %v ", p.label, strings.Repeat("#", filled),
		strings.Repeat(" ", width-filled), frac*100, p.done, len(p.fraction), elapsed)
}
