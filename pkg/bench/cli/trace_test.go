package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const traceScenario = "../../../bench/testdata/trace.yaml"

// A trace scenario runs in both modes on the same requests: every request
// completes, and the shared contexts hit the servers' prefix caches.
func TestTraceReplaysInBothModes(t *testing.T) {
	for _, mode := range []string{"des", "live"} {
		args := []string{"run", "--scenario", traceScenario, "--mode", mode, "--policies", "igw", "--format", "json"}
		if mode == "live" {
			args = append(args, "--speedup", "2")
		}
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, stderr)
		}
		var rep struct {
			Results []map[string]any `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Results) != 1 {
			t.Fatalf("%s: stdout %q: %v", mode, stdout, err)
		}
		r := rep.Results[0]
		// 24 requests, the first two arriving in the 500 ms warmup.
		if r["completed"] != 22.0 || r["failed"] != 0.0 || r["prefix_hit_rate"].(float64) < 0.3 {
			t.Errorf("%s: %v", mode, r)
		}
	}
}

// A broken trace fails the run with the file, the line and the reason.
func TestBadTraceExits1(t *testing.T) {
	dir := t.TempDir()
	scenario, _ := os.ReadFile(traceScenario)
	trace, _ := os.ReadFile("../../../bench/testdata/trace.jsonl")
	lines := strings.SplitAfter(string(trace), "\n")
	lines[2] = strings.Replace(lines[2], `"hash_ids": [`, `"hash_ids": [], "x": [`, 1)
	for name, data := range map[string]string{"trace.yaml": string(scenario), "trace.jsonl": strings.Join(lines, "")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, code := runCLI(t, "run", "--scenario", filepath.Join(dir, "trace.yaml"))
	if code != 1 || !strings.Contains(stderr, "trace.jsonl:3: hash_ids is empty") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
