package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The demo, shortened: both policies served live, the side-by-side table on
// stdout, the progress on stderr, the results and the plot on disk.
func TestDemoShortened(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, code := runCLI(t, "demo", "--duration", "3s", "--speedup", "4", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if head := strings.Fields(lines[0]); strings.Join(head, " ") != "round-robin igw igw vs round-robin" {
		t.Fatalf("table header %q", lines[0])
	}
	for _, row := range []string{"TTFT p50 (s)", "TTFT p99 (s)", "output tok/s", "LoRA loads"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("table lacks %q:\n%s", row, stdout)
		}
	}
	if !strings.Contains(stderr, "2× H100 + 2× A10G") || !strings.Contains(stderr, "demo: 100% (2/2 runs") {
		t.Errorf("stderr %q", stderr)
	}
	png, err := os.Stat(filepath.Join(dir, "ttft-cdf-demo.png"))
	if err != nil || png.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Mode    string `json:"mode"`
		Results []struct {
			Policy    string  `json:"policy"`
			Completed float64 `json:"completed"`
			Failed    float64 `json:"failed"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "live" || len(rep.Results) != 2 || rep.Results[0].Policy != "round-robin" || rep.Results[1].Policy != "igw" {
		t.Fatalf("results %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Completed == 0 || r.Failed != 0 {
			t.Errorf("%s: completed %v, failed %v", r.Policy, r.Completed, r.Failed)
		}
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--speedup -1", "--speedup: the speedup must be positive"},
		{"extra", `unexpected arguments ["extra"]`},
		{"--scenario nope.yaml", "nope.yaml: no such file"},
	} {
		_, stderr, code := runCLI(t, append([]string{"demo"}, strings.Fields(tc.args)...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("demo %s: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}

func TestPercentChange(t *testing.T) {
	for r, want := range map[float64]string{-0.746: "-75%", -0.9962: "-99.6%", 0.45: "+45%", 0: "+0%", -1: "-100%", 2.01: "+201%"} {
		if got := percentChange(r); got != want {
			t.Errorf("percentChange(%v) = %q, want %q", r, got, want)
		}
	}
}
