package plots

import (
	"os"
	"path/filepath"
	"testing"
)

// Every plot is written, as a PNG, when no policy has a figure for it (a
// grid run for policies that do not take part in a scenario): an empty log
// axis used to panic the whole grid.
func TestPlotsWithoutDataAreWritten(t *testing.T) {
	dir := t.TempDir()
	writes := map[string]func(path string) error{
		"cdf":      func(p string) error { return TTFTCDF(p, "empty", nil) },
		"cdf-none": func(p string) error { return TTFTCDF(p, "no values", []Series{{Policy: "igw"}}) },
		"p99":      func(p string) error { return P99ByScenario(p, "empty", []string{"a", "b"}, nil) },
		"sweep":    func(p string) error { return LoadSweep(p, "empty", nil) },
		"outage":   func(p string) error { return OutageTimeline(p, "empty", 10, 20, nil) },
		"windows":  func(p string) error { return CapacityByWindow(p, "empty", []float64{0, 300}, nil) },
	}
	for name, write := range writes {
		path := filepath.Join(dir, name+".png")
		if err := write(path); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("%s: no PNG written (%v)", name, err)
		}
	}
}
