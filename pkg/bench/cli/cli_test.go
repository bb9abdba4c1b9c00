package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/bench/policies"
)

const small = "../../../bench/testdata/small.yaml"

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	code = Main(context.Background(), args, &out, &errs)
	return out.String(), errs.String(), code
}

// mustRunCLI runs args, fails t unless they exit 0, and returns stdout.
func mustRunCLI(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	return stdout
}

func TestRunPrintsOneContractJSONObject(t *testing.T) {
	dir := t.TempDir()
	stdout := mustRunCLI(t, "run", "--scenario", small, "--format", "json", "--policies", "round-robin,oracle",
		"--seeds", "2", "--duration", "10s", "--out", dir)
	dec := json.NewDecoder(strings.NewReader(stdout))
	var rep struct {
		Scenario string                    `json:"scenario"`
		Mode     string                    `json:"mode"`
		Results  []map[string]any          `json:"results"`
		Summary  map[string]map[string]any `json:"summary"`
	}
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatal("stdout holds more than one JSON value")
	}
	if rep.Scenario != "small" || rep.Mode != "des" || len(rep.Results) != 4 || len(rep.Summary) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r["completed"].(float64) <= 0 || r["ttft_p50_s"].(float64) <= 0 {
			t.Fatalf("empty result %v", r)
		}
	}
	for _, f := range []string{"small.json", "ttft-cdf-small.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("--out did not write %s: %v", f, err)
		}
	}
}

func TestFirstSeedChoosesTheSeeds(t *testing.T) {
	stdout := mustRunCLI(t, "run", "--scenario", small, "--format", "json", "--policies", "random",
		"--seeds", "2", "--first-seed", "4", "--duration", "5s")
	var rep struct {
		Results []struct {
			Seed int `json:"seed"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var seeds []int
	for _, r := range rep.Results {
		seeds = append(seeds, r.Seed)
	}
	if len(seeds) != 2 || seeds[0] != 4 || seeds[1] != 5 {
		t.Fatalf("--seeds 2 --first-seed 4 ran seeds %v, want [4 5]", seeds)
	}
	if _, stderr, code := runCLI(t, "run", "--scenario", small, "--first-seed", "0"); code == 0 || !strings.Contains(stderr, "--first-seed must be at least 1") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestUnknownScenarioKeyIsNamed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "typo.yaml")
	data, _ := os.ReadFile(small)
	bad := strings.Replace(string(data), "warmup: 5s", "warmup: 5s\nwarmpu: 5s", 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "run", "--scenario", file)
	if code == 0 || !strings.Contains(stderr, `unknown key "warmpu"`) || !strings.Contains(stderr, "typo.yaml:6:") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestRejectsUnknownPolicyAndMode(t *testing.T) {
	if _, stderr, code := runCLI(t, "run", "--scenario", small, "--policies", "igw,fastest"); code == 0 || !strings.Contains(stderr, `unknown policy "fastest"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "run", "--scenario", small, "--mode", "warp"); code == 0 || !strings.Contains(stderr, `unknown --mode "warp"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, _, code := runCLI(t, "frobnicate"); code == 0 {
		t.Fatal("unknown command accepted")
	}
}

func TestShortenScalesWarmup(t *testing.T) {
	mustRunCLI(t, "run", "--scenario", small, "--policies", "random", "--duration", "6s", "--format", "table")
}

// scenarioDir makes dir/scenarios holding copies of the named files of
// bench/testdata, and returns its path.
func scenarioDir(t *testing.T, dir string, names ...string) string {
	t.Helper()
	scenarios := filepath.Join(dir, "scenarios")
	if err := os.MkdirAll(scenarios, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(small), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scenarios, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return scenarios
}

func TestGridWritesThePage(t *testing.T) {
	dir := t.TempDir()
	scenarios := scenarioDir(t, dir, "small.yaml")
	out := filepath.Join(dir, "out")
	stdout := mustRunCLI(t, "grid", "--scenarios", scenarios, "--seeds", "1", "--policies", "round-robin,least-request,igw,oracle",
		"--duration", "8s", "--out", out)
	page, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"igw-bench grid --scenarios", "## small", "| **igw** |", "vs round-robin", "igw / oracle",
		"ttft-cdf-small.png", "p99-by-scenario.png"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, f := range []string{"ttft-cdf-small.png", "p99-by-scenario.png", "results/small.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(stdout, "grid: 4 runs") {
		t.Errorf("stdout %q", stdout)
	}
}

// Live mode leaves out the oracle with a note; naming only the oracle leaves
// nothing to run, which is an error (nothing is started).
func TestLiveLeavesOutTheOracle(t *testing.T) {
	_, stderr, code := runCLI(t, "run", "--scenario", small, "--mode", "live", "--policies", "oracle")
	if code == 0 || !strings.Contains(stderr, "--mode live leaves out oracle") || !strings.Contains(stderr, "--mode des") ||
		!strings.Contains(stderr, "no policy --mode live can run") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestSpeedupIsValidated(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--speedup 2", "--speedup applies to --mode live only"},
		{"--mode live --speedup -1", "--mode live: the speedup must be positive, or 0 for automatic; got -1"},
		{"--mode live --parallel -2", "--parallel must not be negative"},
	} {
		args := append([]string{"run", "--scenario", small, "--policies", "igw"}, strings.Fields(tc.args)...)
		if _, stderr, code := runCLI(t, args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}

// run --mode live prints the contract's JSON of a live run.
func TestRunLive(t *testing.T) {
	stdout, stderr, code := runCLI(t, "run", "--scenario", "../live/testdata/tiny.yaml", "--mode", "live", "--speedup", "4",
		"--policies", "least-request,igw", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Mode    string           `json:"mode"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if rep.Mode != "live" || len(rep.Results) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r["completed"].(float64) == 0 || r["failed"].(float64) != 0 {
			t.Errorf("result %v", r)
		}
	}
	if !strings.Contains(stderr, "tiny:") || !strings.Contains(stderr, "100%") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
}

// fidelity prints both modes' figures per policy and judges them against the
// tolerance (a generous one here: this checks the command, not the model).
func TestFidelityComparesBothModes(t *testing.T) {
	stdout, stderr, code := runCLI(t, "fidelity", "--scenario", "../live/testdata/tiny.yaml", "--policies", "round-robin,oracle",
		"--speedup", "4", "--tolerance", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var row []string
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) == 7 && f[0] == "round-robin" {
			row = f
		}
	}
	if row == nil || !strings.Contains(stdout, "every policy within 1000%") || strings.Contains(stdout, "oracle") {
		t.Fatalf("stdout %q", stdout)
	}
	if !strings.Contains(stderr, "leaves out oracle") {
		t.Errorf("stderr %q", stderr)
	}
}

// --igw-config runs igw with the given EPP configuration: with the legacy
// blend's, igw routes exactly as the legacy-blend policy does; without it,
// igw runs its own. A configuration the picker rejects fails at once.
func TestIGWConfigReplacesTheBuiltInConfiguration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "legacy.yaml")
	if err := os.WriteFile(file, []byte(policies.LegacyBlendConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	results := func(args ...string) map[string]string {
		t.Helper()
		stdout := mustRunCLI(t, append([]string{"run", "--scenario", small, "--format", "json",
			"--policies", "igw,legacy-blend", "--duration", "10s"}, args...)...)
		var rep struct {
			Results []map[string]any `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range rep.Results {
			policy := r["policy"].(string)
			delete(r, "policy")
			b, _ := json.Marshal(r)
			out[policy] = string(b)
		}
		return out
	}
	if r := results("--igw-config", file); r["igw"] != r["legacy-blend"] {
		t.Errorf("igw with the legacy blend's configuration:\n%s\nlegacy-blend:\n%s", r["igw"], r["legacy-blend"])
	}
	if r := results(); r["igw"] == r["legacy-blend"] {
		t.Error("igw without --igw-config routes as the legacy blend: the test proves nothing")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("scorers: [{plugin: no-such-scorer, weight: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "run", "--scenario", small, "--igw-config", bad); code == 0 || !strings.Contains(stderr, "--igw-config "+bad) {
		t.Fatalf("bad configuration: exit %d, stderr %q", code, stderr)
	}
}

// TestCommandLine holds igw-bench to the other binaries' conventions: --help
// and --version exit 0, a bad command line exits 2 with a usage line, and
// flags take the one GNU syntax (a single dash is a shorthand, and the
// subcommands have none).
func TestCommandLine(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"run", "--help"}, {"grid", "--help"}, {"demo", "--help"}, {"fidelity", "-h"}} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(stdout+stderr, "--duration") {
			t.Errorf("%q: exit %d, output %q", args, code, stdout+stderr)
		}
	}
	if stdout, _, code := runCLI(t, "--version"); code != 0 || !strings.HasPrefix(stdout, "igw-bench ") {
		t.Errorf("--version: exit %d, stdout %q", code, stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "igw-bench run"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "--frobnicate"}, "usage: igw-bench run [flags]"},
		{[]string{"run", "-scenario", small}, "usage: igw-bench run [flags]"},
		{[]string{"grid", "--seeds", "many"}, "usage: igw-bench grid [flags]"},
		{[]string{"demo", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"run"}, "--scenario FILE is required"},
		{[]string{"run", "--scenario", small, "--seeds", "0"}, "--seeds must be at least 1"},
		{[]string{"fidelity", "--tolerance", "0"}, "--tolerance must be positive"},
	} {
		_, stderr, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d (want 2), stderr %q (want %q)", tc.args, code, stderr, tc.want)
		}
	}
}

// A multi-cluster scenario runs the global policies by default, prints the
// outage table beside the results and writes the timeline plot; live mode
// leaves the global policies out.
func TestRunMultiClusterScenario(t *testing.T) {
	out := t.TempDir()
	stdout := mustRunCLI(t, "run", "--scenario", "../../../bench/scenarios/global-three-region.yaml", "--duration", "20s", "--out", out)
	for _, want := range []string{"member outages", "errors w/o first byte", "global-round-robin", "nearest-region", "global-blend", "igw-global", "global-oracle", "cut by outage"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "least-request") {
		t.Errorf("a single-cluster policy ran by default:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "outage-global-three-region.png")); err != nil {
		t.Error(err)
	}
	if _, stderr, code := runCLI(t, "run", "--mode", "live", "--scenario", small, "--policies", "igw-global"); code == 0 || !strings.Contains(stderr, "leaves out igw-global") {
		t.Errorf("live ran a global policy: exit %d, %s", code, stderr)
	}
}
