package bbr

import (
	"bytes"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestParseAdapterMapping(t *testing.T) {
	good := "adapters:\n  sql-lora: meta-llama/Llama-3.1-8B-Instruct\n  \"pirate\": openai/gpt-oss-20b\n"
	got, err := ParseAdapterMapping([]byte(good))
	if err != nil || !maps.Equal(got, map[string]string{"sql-lora": "meta-llama/Llama-3.1-8B-Instruct", "pirate": "openai/gpt-oss-20b"}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseAdapterMapping([]byte("adapters: {}")); err != nil || len(got) != 0 {
		t.Fatalf("explicitly empty mapping: %v %v", got, err)
	}
	for name, bad := range map[string]string{
		"empty file":       "",
		"blank file":       " \n\t\n",
		"no adapters key":  "other: 1",
		"unknown field":    "adapters: {a: b}\nextra: 1",
		"not YAML":         "adapters: [",
		"list":             "adapters: [a, b]",
		"self mapping":     "adapters: {a: a}",
		"empty base":       `adapters: {a: ""}`,
		"empty adapter":    `adapters: {"": b}`,
		"control char":     "adapters: {\"a\\nb\": c}",
		"duplicate key":    "adapters:\n  a: b\n  a: c\n",
		"too long to send": "adapters: {a: " + strings.Repeat("b", MaxModelNameBytes+1) + "}",
	} {
		if got, err := ParseAdapterMapping([]byte(bad)); err == nil {
			t.Errorf("%s: accepted as %v", name, got)
		}
	}
}

func TestMarshalAdapterMappingRoundTrips(t *testing.T) {
	in := map[string]string{"b-lora": "base-2", "a-lora": "base-1", "with: colon": "base #1"}
	data, err := MarshalAdapterMapping(in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MarshalAdapterMapping(maps.Clone(in))
	if !bytes.Equal(data, again) || bytes.Index(data, []byte("a-lora")) > bytes.Index(data, []byte("b-lora")) {
		t.Fatalf("output not stable and sorted:\n%s", data)
	}
	out, err := ParseAdapterMapping(data)
	if err != nil || !maps.Equal(in, out) {
		t.Fatalf("round trip: %v %v", out, err)
	}
	if _, err := MarshalAdapterMapping(map[string]string{"a": "a"}); err == nil {
		t.Fatal("rendered an invalid mapping")
	}
	if data, err := MarshalAdapterMapping(nil); err != nil || string(data) != "adapters: {}\n" {
		t.Fatalf("no adapters: %q %v", data, err)
	}
}

func TestAdapterMappingFileKeepsTheLastGoodMapping(t *testing.T) {
	path, write := tempFile(t, AdapterMappingFileName)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	r := NewRouter(RouterConfig{Metrics: metrics})
	var logs bytes.Buffer
	f := NewAdapterMappingFile(path, 0, r, metrics, slog.New(slog.NewTextHandler(&logs, nil)))
	base := func() string {
		d, e := r.Route(jsonHeaders(), []byte(`{"model":"sql-lora"}`))
		if e != nil {
			t.Fatal(e)
		}
		return d.BaseModel
	}

	if err := f.Load(); err == nil || base() != "" {
		t.Fatal("a missing file must be an error and route adapters as plain models")
	}
	write("adapters: {sql-lora: llama-8b}")
	if err := f.Load(); err != nil || base() != "llama-8b" {
		t.Fatalf("load: %v, base %q", err, base())
	}
	write("adapters: {sql-lora: sql-lora}")
	if err := f.Load(); err == nil || base() != "llama-8b" {
		t.Fatalf("an invalid file replaced the mapping: %v, base %q", err, base())
	}
	if !strings.Contains(logs.String(), "mapped to itself") || !strings.Contains(logs.String(), "keeping the last good one") {
		t.Fatalf("the reason is not logged: %s", logs.String())
	}
	write("")
	if err := f.Load(); err == nil || base() != "llama-8b" {
		t.Fatal("a half-written (empty) file replaced the mapping")
	}
	write("adapters: {sql-lora: llama-70b, other: llama-8b}")
	if err := f.Load(); err != nil || base() != "llama-70b" {
		t.Fatalf("reload: %v, base %q", err, base())
	}
	checkLoads(t, reg, MetricAdapterReloads, 2, 3, "missing, invalid, empty")
	if st := f.Status(); !st.Loaded || st.Error != "" {
		t.Errorf("status %+v", st)
	}
}

// checkLoads checks a watched file's load counter: applied and failed loads,
// failures naming what failed.
func checkLoads(t *testing.T, reg *prometheus.Registry, metric string, applied, failed float64, failures string) {
	t.Helper()
	if got := counter(t, reg, metric, map[string]string{"result": ReloadApplied}); got != applied {
		t.Errorf("%s: %v applied loads counted, want %v", metric, got, applied)
	}
	if got := counter(t, reg, metric, map[string]string{"result": ReloadFailed}); got != failed {
		t.Errorf("%s: %v failed loads counted, want %v (%s)", metric, got, failed, failures)
	}
}

// tempFile is a file named name in a fresh directory, and a function that
// writes it.
func tempFile(t *testing.T, name string) (string, func(string)) {
	path := filepath.Join(t.TempDir(), name)
	return path, func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
