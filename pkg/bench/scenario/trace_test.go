package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readTestdata reads testdata/name as a trace of format.
func readTestdata(t *testing.T, name, format string) []TraceRecord {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadTrace(f, name, format)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestReadMooncake(t *testing.T) {
	recs := readTestdata(t, "mini.jsonl", TraceMooncake)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4 (the blank line skipped)", len(recs))
	}
	r := recs[1]
	if r.At != 500*time.Millisecond || r.InputTokens != 1100 || r.OutputTokens != 10 || len(r.Blocks) != 3 || r.Blocks[2] != 4 {
		t.Errorf("record 1: %+v", r)
	}
}

func TestReadAzure(t *testing.T) {
	recs := readTestdata(t, "mini.csv", TraceAzure)
	if len(recs) != 3 || recs[1].At != 500*time.Millisecond || recs[2].At != 2020040*time.Microsecond || recs[0].InputTokens != 1000 || recs[2].OutputTokens != 27 {
		t.Fatalf("records: %+v", recs)
	}
	// No two requests share a block: Azure records no prefixes.
	seen := map[uint32]bool{}
	for _, r := range recs {
		if len(r.Blocks) != (r.InputTokens+511)/512 {
			t.Errorf("%d blocks for %d tokens", len(r.Blocks), r.InputTokens)
		}
		for _, b := range r.Blocks {
			if seen[b] {
				t.Errorf("block %d used twice", b)
			}
			seen[b] = true
		}
	}
}

// Every kind of bad input names the file, the line and the reason.
func TestReadTraceErrors(t *testing.T) {
	for _, c := range []struct{ name, format, data, want string }{
		{"malformed", TraceMooncake, `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}` + "\n{\"timestamp\": 5,", "t:2: not a JSON object"},
		{"negative", TraceMooncake, `{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}`, "t:1: timestamp -1 is negative"},
		{"unsorted", TraceMooncake, `{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [1]}` + "\n\n" + `{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [1]}`, "t:3: timestamp 3 ms precedes the previous request's 9 ms"},
		{"empty hash_ids", TraceMooncake, `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": []}`, "t:1: hash_ids is empty"},
		{"missing key", TraceMooncake, `{"timestamp": 0, "input_length": 10, "hash_ids": [1]}`, "t:1: timestamp, input_length and output_length are required"},
		{"block count", TraceMooncake, `{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}`, "t:1: input_length 1025 takes 3 blocks of 512 tokens, but hash_ids has 2"},
		{"block id", TraceMooncake, `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-4]}`, "t:1: hash_ids[0] = -4 is outside"},
		{"zero output", TraceMooncake, `{"timestamp": 0, "input_length": 10, "output_length": 0, "hash_ids": [1]}`, "t:1: output length 0 is not in"},
		{"azure header", TraceAzure, "time,in,out\n", "t:1: the header must name TIMESTAMP"},
		{"azure empty", TraceAzure, "", "t:1: the file is empty"},
		{"azure time", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", `t:2: TIMESTAMP "yesterday" is not a time`},
		{"azure number", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,x,1\n", `t:2: ContextTokens and GeneratedTokens must be whole numbers, got "x" and "1"`},
		{"azure columns", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1\n", "t:2: wrong number of fields"},
		{"azure unsorted", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n2023-11-16 18:17:03.5,1,1\n", "t:3: timestamp -400 ms precedes the previous request's 0 ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(c.data), "t", c.format)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want one starting %q", err, c.want)
			}
		})
	}
}

// traceScenario writes a scenario beside a copy of the test traces and loads it.
func traceScenario(t *testing.T, workload string) (*Scenario, error) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"mini.jsonl", "mini.csv"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "s.yaml")
	yaml := "name: s\nwarmup: 200ms\nfleet: [{name: a, replicas: 1, gpu: H100, model: llama-3.1-8b}]\nworkload:\n" + workload + "slo: {ttft: 1s, tpot: 50ms}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func TestTraceScenario(t *testing.T) {
	s, err := traceScenario(t, "  trace: {file: mini.jsonl, format: mooncake}\n")
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Workload.Trace
	if tr.RateScale != 1 || len(tr.Records) != 4 || s.Duration != 4001*time.Millisecond {
		t.Errorf("whole trace: rateScale %v, %d records, duration %v", tr.RateScale, len(tr.Records), s.Duration)
	}
	// A window compressed twice: arrivals 500 ms and 1500 ms become 0 and 500 ms.
	s, err = traceScenario(t, "  trace: {file: mini.jsonl, format: mooncake, rateScale: 2, start: 500ms, duration: 2s}\n")
	if err != nil {
		t.Fatal(err)
	}
	tr = s.Workload.Trace
	if len(tr.Records) != 2 || s.Duration != time.Second || tr.Arrival(&tr.Records[1]) != 500*time.Millisecond {
		t.Errorf("window: %d records, duration %v", len(tr.Records), s.Duration)
	}
	if s, err = traceScenario(t, "  trace: {file: mini.csv, format: azure}\n"); err != nil || len(s.Workload.Trace.Records) != 3 {
		t.Errorf("azure: %v", err)
	}
}

func TestTraceScenarioErrors(t *testing.T) {
	for _, c := range []struct{ workload, want string }{
		{"  trace: {file: mini.jsonl, format: mooncake, rate: 2}\n", `unknown key "rate" in workload.trace (known: file, format, rateScale, start, duration)`},
		{"  trace: {file: mini.jsonl, format: sharegpt}\n", `workload.trace.format must be mooncake or azure, got "sharegpt"`},
		{"  trace: {file: mini.jsonl, format: mooncake, rateScale: -1}\n", "workload.trace.rateScale must be in (0, 1e6]"},
		{"  trace: {file: missing.jsonl, format: mooncake}\n", "workload.trace.file: open "},
		{"  trace: {file: mini.jsonl, format: mooncake, start: 1h}\n", "no request in the window"},
		{"  trace: {file: mini.jsonl, format: mooncake}\n  arrival: {type: poisson, rate: 1}\n", "workload.arrival cannot be used with workload.trace"},
		{"  trace: {file: mini.csv, format: mooncake}\n", "mini.csv:1: not a JSON object"},
	} {
		_, err := traceScenario(t, c.workload)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.workload, err, c.want)
		}
	}
}

// FuzzReadMooncake and FuzzReadAzure: any input either parses into records
// that keep the trace's invariants or fails naming the file; nothing panics.
func FuzzReadMooncake(f *testing.F) {
	if data, err := os.ReadFile("testdata/mini.jsonl"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"timestamp": 1e300, "input_length": 1, "output_length": 1, "hash_ids": [16777215]}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkRecords(t, data, TraceMooncake) })
}

func FuzzReadAzure(f *testing.F) {
	if data, err := os.ReadFile("testdata/mini.csv"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("GeneratedTokens,TIMESTAMP,ContextTokens\n1,2023-11-16 18:17:03,5\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkRecords(t, data, TraceAzure) })
}

func checkRecords(t *testing.T, data []byte, format string) {
	recs, err := ReadTrace(strings.NewReader(string(data)), "fuzz", format)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "fuzz:") {
			t.Fatalf("error does not name the file and line: %v", err)
		}
		return
	}
	for i, r := range recs {
		if r.At < 0 || (i > 0 && r.At < recs[i-1].At) || r.InputTokens < 1 || r.OutputTokens < 1 ||
			len(r.Blocks) != (r.InputTokens+TraceBlockTokens-1)/TraceBlockTokens {
			t.Fatalf("record %d breaks an invariant: %+v", i, r)
		}
	}
}
