package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// capacity prints the contract's JSON object: the SLO, one result per policy
// and seed, and the medians.
func TestCapacityPrintsTheContractJSON(t *testing.T) {
	dir := t.TempDir()
	stdout := mustRunCLI(t, "capacity", "--scenario", small, "--format", "json", "--policies", "igw,oracle",
		"--seeds", "2", "--duration", "10s", "--out", dir)
	var rep struct {
		Scenario string             `json:"scenario"`
		SLO      map[string]float64 `json:"slo"`
		Results  []struct {
			Policy  string  `json:"policy"`
			Seed    int     `json:"seed"`
			Scale   float64 `json:"capacity_rate_scale"`
			ReqPerS float64 `json:"capacity_req_per_s"`
		} `json:"results"`
		Summary map[string]map[string]float64 `json:"summary"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not the contract's JSON: %v\n%s", err, stdout)
	}
	if rep.Scenario != "small" || rep.SLO["ttft_s"] != 1 || rep.SLO["tpot_s"] != 0.06 || len(rep.Results) != 4 || len(rep.Summary) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Scale <= 0 || r.ReqPerS <= 0 {
			t.Errorf("result %+v", r)
		}
	}
	if s := rep.Summary["igw"]; s["capacity_rate_scale"] <= 0 || s["capacity_req_per_s"] <= 0 {
		t.Errorf("summary %v", rep.Summary)
	}
	if _, err := os.Stat(filepath.Join(dir, "capacity-small.json")); err != nil {
		t.Errorf("--out: %v", err)
	}
	stdout, _, code := runCLI(t, "capacity", "--scenario", small, "--policies", "least-request,igw,oracle", "--duration", "10s")
	if code != 0 || !strings.Contains(stdout, "vs best peer") || !strings.Contains(stdout, "least-request (best peer)") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}
}

// grid --capacity leads the page with each trace scenario's capacity table
// and adds its load sweep (table and plot). With --first-seed, every run,
// search and sweep takes the held-out seed, and the page says which.
func TestGridLeadsWithCapacity(t *testing.T) {
	dir := t.TempDir()
	scenarios := scenarioDir(t, dir, "trace.yaml", "trace.jsonl")
	out := filepath.Join(dir, "out")
	mustRunCLI(t, "grid", "--scenarios", scenarios, "--seeds", "1", "--first-seed", "7", "--policies", "least-request,igw,oracle",
		"--capacity", "--out", out)
	for _, f := range []string{"results/trace.json", "results/capacity-trace.json"} {
		var rep struct {
			Results []struct {
				Seed int `json:"seed"`
			} `json:"results"`
		}
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || json.Unmarshal(data, &rep) != nil || len(rep.Results) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range rep.Results {
			if r.Seed != 7 {
				t.Errorf("%s has seed %d, want only the held-out seed 7", f, r.Seed)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	capacityAt, tablesAt := strings.Index(page, "## Capacity under SLO"), strings.Index(page, "\n## trace\n")
	if capacityAt < 0 || tablesAt < 0 || capacityAt > tablesAt {
		t.Errorf("the capacity section does not come first (at %d, per-scenario tables at %d)", capacityAt, tablesAt)
	}
	for _, want := range []string{"| policy | capacity (× rate) | req/s | vs oracle | vs best peer |", "| least-request (best peer) |",
		"## Load sweeps", "igw TTFT p50 / p99 (s), goodput", "sweep-trace.png", "- Seeds: 7;", "median of seeds 7.",
		"`" + filepath.ToSlash(filepath.Join(scenarios, "trace.yaml")) + "`"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, f := range []string{"sweep-trace.png", "results/capacity-trace.json"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("missing %s", f)
		}
	}
}

// capacity --windows searches each window of the trace and compares every
// policy with igw over them: a row per window, the summary, and with --out
// the JSON and the plot. A scenario that is not a trace has no windows.
func TestCapacityOnWindows(t *testing.T) {
	dir := t.TempDir()
	scenarios := scenarioDir(t, dir, "trace.yaml", "trace.jsonl")
	file := filepath.Join(scenarios, "trace.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	windowed := strings.Replace(string(data), "format: mooncake}", "format: mooncake, duration: 2s}", 1)
	if err := os.WriteFile(file, []byte(windowed), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout := mustRunCLI(t, "capacity", "--scenario", file, "--windows", "2", "--window-every", "1500ms", "--policies", "least-request,igw",
		"--format", "json", "--out", out)
	var rep struct {
		Scenario  string  `json:"scenario"`
		Every     float64 `json:"every_s"`
		Reference string  `json:"reference"`
		Windows   []struct {
			Start    float64 `json:"start_s"`
			Scenario string  `json:"scenario"`
			Results  []struct {
				Scale float64 `json:"capacity_rate_scale"`
			} `json:"results"`
			Summary map[string]map[string]float64 `json:"summary"`
		} `json:"windows"`
		Summary map[string]map[string]float64 `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if rep.Scenario != "trace" || rep.Every != 1.5 || rep.Reference != "igw" || len(rep.Windows) != 2 ||
		rep.Windows[1].Start != 1.5 || rep.Windows[1].Scenario != "trace-from-1.5s" || len(rep.Windows[1].Results) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if s := rep.Summary["igw"]; s["geomean_ratio"] != 1 || s["above"] != 0 || s["below"] != 0 {
		t.Errorf("igw against itself: %v", s)
	}
	if s := rep.Summary["least-request"]; s["geomean_ratio"] <= 0 || s["above"]+s["below"] > 2 {
		t.Errorf("least-request: %v", s)
	}
	for _, f := range []string{"capacity-windows-trace.json", "capacity-windows-trace.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("--out lacks %s (%v)", f, err)
		}
	}
	stdout = mustRunCLI(t, "capacity", "--scenario", file, "--windows", "2", "--policies", "least-request,igw")
	for _, want := range []string{"on 2 windows of 2s of the trace, every 2s", "window from", "vs igw (geometric mean)", "windows above / below igw"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	stdout = mustRunCLI(t, "capacity", "--scenario", file, "--windows", "2", "--policies", "least-request,igw", "--format", "markdown")
	for _, want := range []string{"## trace\n", "| window from | least-request | igw |", "| vs igw (geometric mean) |",
		"![trace capacity by window](capacity-windows-trace.png)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("markdown lacks %q:\n%s", want, stdout)
		}
	}
	if _, stderr, code := runCLI(t, "capacity", "--scenario", file, "--format", "markdown"); code != 2 || !strings.Contains(stderr, "--windows only") {
		t.Errorf("markdown without windows: exit %d, %s", code, stderr)
	}
	checkWindowLoads(t, file)
	if _, stderr, code := runCLI(t, "capacity", "--scenario", small, "--windows", "2", "--policies", "igw"); code == 0 ||
		!strings.Contains(stderr, "windows need a trace scenario") {
		t.Errorf("windows of a synthetic scenario: exit %d, %s", code, stderr)
	}
}

// --window-loads runs every policy on each window at fractions of its
// capacity (the largest, without the oracle) and counts each policy's
// misses: in the JSON by window and load, summed in the summary, and as a
// row of the table. It needs --windows and fractions above 0.
func checkWindowLoads(t *testing.T, file string) {
	t.Helper()
	stdout := mustRunCLI(t, "capacity", "--scenario", file, "--windows", "2", "--window-every", "1500ms", "--policies", "least-request,igw",
		"--window-loads", "0.5,0.9", "--format", "json")
	var rep struct {
		Loads   []float64 `json:"loads"`
		Windows []struct {
			Summary map[string]struct {
				Scale float64 `json:"capacity_rate_scale"`
			} `json:"summary"`
			Loads []struct {
				Load    float64        `json:"load"`
				Scale   float64        `json:"rate_scale"`
				Counted int            `json:"counted"`
				Missed  map[string]int `json:"missed"`
			} `json:"loads"`
		} `json:"windows"`
		Summary map[string]struct {
			Missed  int `json:"missed"`
			Counted int `json:"counted"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if !slices.Equal(rep.Loads, []float64{0.5, 0.9}) || len(rep.Windows) != 2 {
		t.Fatalf("loads %v, %d windows", rep.Loads, len(rep.Windows))
	}
	counted := 0
	for k, w := range rep.Windows {
		top := max(w.Summary["igw"].Scale, w.Summary["least-request"].Scale)
		if len(w.Loads) != 2 {
			t.Fatalf("window %d: %d loads, want 2", k, len(w.Loads))
		}
		for i, l := range w.Loads {
			if l.Load != rep.Loads[i] || math.Abs(l.Scale-l.Load*top) > 1e-9 || l.Counted <= 0 || len(l.Missed) != 2 ||
				l.Missed["igw"] < 0 || l.Missed["igw"] > l.Counted {
				t.Errorf("window %d, load %v: %+v (top capacity %v)", k, l.Load, l, top)
			}
			counted += l.Counted
		}
	}
	if s := rep.Summary["igw"]; s.Counted != counted {
		t.Errorf("igw's summary counts %d requests, the loads %d", s.Counted, counted)
	}
	stdout = mustRunCLI(t, "capacity", "--scenario", file, "--windows", "2", "--policies", "least-request,igw", "--window-loads", "0.9")
	if !strings.Contains(stdout, "missed at 0.9× the largest capacity") {
		t.Errorf("table lacks the misses:\n%s", stdout)
	}
	for _, args := range [][]string{{"--window-loads", "0.9"}, {"--windows", "2", "--window-loads", "0"}, {"--windows", "2", "--window-loads", "x"}} {
		if _, stderr, code := runCLI(t, append([]string{"capacity", "--scenario", file, "--policies", "igw"}, args...)...); code != 2 ||
			!strings.Contains(stderr, "window-loads") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}
