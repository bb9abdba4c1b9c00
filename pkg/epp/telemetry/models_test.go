package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// vllmModels is vLLM's answer with one adapter registered (--lora-modules):
// the adapter's entry names the base model as its parent; permissions carry
// ids of their own that are not model names.
const vllmModels = `{"object":"list","data":[
{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1737000000,"owned_by":"vllm",
 "root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,"max_model_len":131072,
 "permission":[{"id":"modelperm-1","object":"model_permission","allow_sampling":true,"organization":"*","group":null}]},
{"id":"sql-lora","object":"model","created":1737000000,"owned_by":"vllm","root":"/adapters/sql",
 "parent":"meta-llama/Llama-3.1-8B-Instruct","max_model_len":null,"permission":[{"id":"modelperm-2"}]}]}`

func TestParseModels(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"vllm with an adapter", vllmModels, []string{"meta-llama/Llama-3.1-8B-Instruct", "sql-lora"}},
		{"sglang", `{"object":"list","data":[{"id":"Qwen/Qwen3-32B","object":"model","created":1,"owned_by":"sglang","root":"Qwen/Qwen3-32B","max_model_len":40960}]}`,
			[]string{"Qwen/Qwen3-32B"}},
		{"order and repeats kept", `{"data":[{"id":"b"},{"id":"a"},{"id":"b"}]}`, []string{"b", "a", "b"}},
		{"unknown fields ignored", `{"object":"list","next":null,"data":[{"id":"m","extra":{"id":"not-a-model"}}]}`, []string{"m"}},
		{"serves nothing", `{"object":"list","data":[]}`, []string{}},
	} {
		got, err := ParseModels(strings.NewReader(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestParseModelsRejects: anything but a complete list is refused as a whole,
// so a partial read never makes a server look as if it lacked a model.
func TestParseModelsRejects(t *testing.T) {
	for name, body := range map[string]string{
		"empty":            "",
		"not json":         "<html>404 page not found</html>",
		"a bare array":     `[{"id":"m"}]`,
		"null":             "null",
		"no data":          `{"object":"list"}`,
		"null data":        `{"data":null}`,
		"data not a list":  `{"data":{"id":"m"}}`,
		"entry without id": `{"data":[{"id":"m"},{"object":"model"}]}`,
		"empty id":         `{"data":[{"id":""}]}`,
		"null entry":       `{"data":[null]}`,
		"id not a string":  `{"data":[{"id":5}]}`,
		"truncated":        vllmModels[:len(vllmModels)/2],
		"trailing data":    `{"data":[{"id":"m"}]} {"data":[]}`,
	} {
		if got, err := ParseModels(strings.NewReader(body)); err == nil {
			t.Errorf("%s: accepted as %q", name, got)
		}
	}
}

func FuzzParseModels(f *testing.F) {
	f.Add(vllmModels)
	f.Add(`{"data":[{"id":"a"},{"id":"a"}]}`)
	f.Add(`{"data":[{"id":"\u00e9\ud800"}]} `)
	f.Add(`{"data":[null]}`)
	f.Fuzz(func(t *testing.T, body string) {
		names, err := ParseModels(strings.NewReader(body))
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" {
				t.Fatalf("empty name accepted from %q", body)
			}
		}
		// The names are the list's: written back as a list, they read the same.
		type entry struct {
			ID string `json:"id"`
		}
		list := struct {
			Data []entry `json:"data"`
		}{Data: []entry{}}
		for _, n := range names {
			list.Data = append(list.Data, entry{ID: n})
		}
		again, _ := json.Marshal(list)
		back, err := ParseModels(strings.NewReader(string(again)))
		if err != nil || !slices.Equal(back, names) {
			t.Fatalf("names %q written back as %s read as %q (%v)", names, again, back, err)
		}
		served := datastore.NewServedModels(names, time.Time{})
		if !slices.IsSorted(served.Names) || len(slices.Compact(slices.Clone(served.Names))) != len(served.Names) {
			t.Fatalf("served names not sorted and distinct: %q", served.Names)
		}
		for _, n := range names {
			if !served.Serves(n) {
				t.Fatalf("listed %q not served", n)
			}
		}
	})
}

// TestModelListerKeepsLastListOnFailure: a read stores the list with the time
// it started; a failing or garbled answer keeps the previous list and its
// time; Run follows the endpoint set and reads the endpoints it adds.
func TestModelListerKeepsLastListOnFailure(t *testing.T) {
	var answer atomic.Value
	answer.Store(`{"data":[{"id":"base"},{"id":"sql"}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch body := answer.Load().(string); {
		case r.URL.Path != "/v1/models":
			http.NotFound(w, r)
		case body == "fail":
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		default:
			w.Write([]byte(body))
		}
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[{"id":"base"}]}`))
	}))
	defer other.Close()

	store := datastore.NewStore(latency.DefaultPriors)
	ep := endpointOf(t, srv)
	store.SetEndpoints([]datastore.Endpoint{ep})
	st := store.Get(ep.Key())
	clock := time.Unix(5000, 0)
	var failures atomic.Int64
	l := &ModelLister{Poll: Poll{Store: store, Interval: time.Hour, Timeout: time.Second, Now: func() time.Time { return clock },
		Observe: func(_ string, err error, _ time.Duration) {
			if err != nil {
				failures.Add(1)
			}
		}}}
	ctx := context.Background()
	if err := l.ReadOnce(ctx, st); err != nil {
		t.Fatal(err)
	}
	first := st.ServedModels()
	if first == nil || !slices.Equal(first.Names, []string{"base", "sql"}) || !first.ReadAt.Equal(clock) {
		t.Fatalf("first read stored %+v", first)
	}
	for _, bad := range []string{"fail", `{"data":[{"id":"base"},{}]}`} {
		answer.Store(bad)
		clock = clock.Add(time.Minute)
		if err := l.ReadOnce(ctx, st); err == nil {
			t.Fatalf("answer %q read without error", bad)
		}
		if got := st.ServedModels(); got != first {
			t.Fatalf("after a failed read (%q) the list became %+v", bad, got)
		}
	}
	if failures.Load() != 2 {
		t.Fatalf("observed %d failures, want 2", failures.Load())
	}
	answer.Store(`{"data":[{"id":"base"}]}`)
	clock = clock.Add(time.Minute)
	if err := l.ReadOnce(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got := st.ServedModels(); got.Serves("sql") || !got.ReadAt.Equal(clock) {
		t.Fatalf("unloaded adapter still listed: %+v", got)
	}

	// Run reads an endpoint added while it runs, although its interval is an hour.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	added := endpointOf(t, other)
	store.SetEndpoints([]datastore.Endpoint{ep, added})
	waitFor(t, "the added endpoint's list", func() bool { return store.Get(added.Key()).ServedModels() != nil })
}
