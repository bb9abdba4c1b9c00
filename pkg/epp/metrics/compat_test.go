package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/config/configtest"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/metrics"
	"github.com/igw-dev/igw/pkg/epp/server"
	"github.com/igw-dev/igw/pkg/extproctest"
)

// picker is the ext_proc server over a two-pod pool (the second pod serves
// two ports), with telemetry: queues 1, 3 and 5, KV use 0.2 and 0.4 on the
// endpoints that report it.
func picker(t *testing.T) (*metrics.Metrics, *extproctest.Client, *datastore.Store) {
	t.Helper()
	d := configtest.Director(t, config.Default, director.Options{},
		datastore.Endpoint{Address: "10.0.0.1", Port: 8000}, datastore.Endpoint{Address: "10.0.0.2", Port: 8000}, datastore.Endpoint{Address: "10.0.0.2", Port: 8001})
	store := d.Store()
	now := time.Now()
	for _, s := range []struct {
		key     string
		waiting int
		kv      float64
	}{{"10.0.0.1:8000", 1, 0.2}, {"10.0.0.2:8000", 3, 0.4}, {"10.0.0.2:8001", 5, -1}} {
		m := datastore.Metrics{Waiting: s.waiting, Running: 2, SampledAt: now}
		if s.kv >= 0 {
			m.KVCacheUsage, m.KVCacheKnown = s.kv, true
		}
		d.UpdateMetrics(s.key, m, now)
	}
	m := metrics.New()
	m.ObservePool("llama-pool", store)
	return m, extproctest.Start(t, &server.ExtProc{Director: d, Metrics: m}, extproctest.Config{}), store
}

func streamed(usage string) *extproctest.Response {
	return &extproctest.Response{
		Headers: extproctest.NewHeaders(":status", "200", "content-type", "text/event-stream"),
		Chunks: [][]byte{
			[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"),
			[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"),
			[]byte("data: {\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n"),
		},
	}
}

func TestRequestsRecordTheInferenceExtensionsMetrics(t *testing.T) {
	m, client, _ := picker(t)
	ctx := context.Background()
	model := map[string]string{"model_name": "llama", "target_model_name": "llama"}

	body := []byte(`{"model":"llama","stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	for range 2 {
		req := extproctest.PostJSON("/v1/chat/completions", body)
		req.Response = streamed(`{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}`)
		if _, err := client.Process(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// An upstream error and a request the picker rejects (not JSON).
	req := extproctest.PostJSON("/v1/chat/completions", body)
	req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "500"), Chunks: [][]byte{[]byte("boom")}}
	if _, err := client.Process(ctx, req); err != nil {
		t.Fatal(err)
	}
	if res, err := client.Process(ctx, extproctest.PostJSON("/v1/chat/completions", []byte(`{"model":`))); err != nil || res.ImmediateResponse == nil {
		t.Fatalf("a broken body was routed: %v", err)
	}

	fams := servetest.Gather(t, m.Registry)
	if got := servetest.Series(t, fams, metrics.ObjectiveRequests, model).GetCounter().GetValue(); got != 3 {
		t.Errorf("%s{llama} = %v, want 3", metrics.ObjectiveRequests, got)
	}
	if got := servetest.Series(t, fams, metrics.ObjectiveRequestErrors, map[string]string{"model_name": "llama", "error_code": metrics.ErrorModelServer}).GetCounter().GetValue(); got != 1 {
		t.Errorf("model server errors = %v, want 1", got)
	}
	if got := servetest.Series(t, fams, metrics.ObjectiveRequestErrors, map[string]string{"model_name": "", "error_code": metrics.ErrorBadRequest}).GetCounter().GetValue(); got != 1 {
		t.Errorf("bad requests = %v, want 1", got)
	}
	if got := servetest.Series(t, fams, metrics.ObjectiveRunningRequests, map[string]string{"model_name": "llama"}).GetGauge().GetValue(); got != 0 {
		t.Errorf("running requests after every response ended = %v", got)
	}
	in := servetest.Series(t, fams, metrics.ObjectiveInputTokens, model).GetHistogram()
	out := servetest.Series(t, fams, metrics.ObjectiveOutputTokens, model).GetHistogram()
	cached := servetest.Series(t, fams, metrics.ObjectivePromptCachedTokens, model).GetHistogram()
	if in.GetSampleCount() != 2 || in.GetSampleSum() != 14 || out.GetSampleSum() != 4 || cached.GetSampleSum() != 8 {
		t.Errorf("tokens: input %d/%v, output %v, cached %v; want 2 responses of 7 prompt, 2 completion, 4 cached tokens",
			in.GetSampleCount(), in.GetSampleSum(), out.GetSampleSum(), cached.GetSampleSum())
	}
	for _, name := range []string{metrics.ObjectiveRequestDuration, metrics.ObjectiveNTPOT, metrics.ObjectiveResponseSizes} {
		if n := servetest.Series(t, fams, name, model).GetHistogram().GetSampleCount(); n != 2 {
			t.Errorf("%s has %d observations, want the 2 successful responses", name, n)
		}
	}
	if n := servetest.Series(t, fams, metrics.ObjectiveRequestSizes, model).GetHistogram().GetSampleCount(); n != 3 {
		t.Errorf("%s has %d observations, want 3", metrics.ObjectiveRequestSizes, n)
	}
	if n := servetest.Series(t, fams, metrics.ObjectiveTTFT, model).GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("%s has %d observations, want 2 (the 500 streamed no token)", metrics.ObjectiveTTFT, n)
	}
	if p := servetest.Series(t, fams, metrics.ObjectivePredictedTTFT, model).GetHistogram(); p.GetSampleCount() != 3 || p.GetSampleSum() <= 0 {
		t.Errorf("predicted TTFT: %d observations summing to %v, want 3 positive ones", p.GetSampleCount(), p.GetSampleSum())
	}
	if got := servetest.Series(t, fams, metrics.SchedulerAttempts, map[string]string{"status": "success"}).GetCounter().GetValue(); got != 3 {
		t.Errorf("successful scheduling attempts %v, want 3", got)
	}
	e2e := servetest.Series(t, fams, metrics.SchedulerE2EDuration, nil).GetHistogram().GetSampleCount()
	own := servetest.Series(t, fams, metrics.SchedulingDuration, nil).GetHistogram().GetSampleCount()
	if e2e != own || e2e != 3 {
		t.Errorf("%s has %d observations, %s %d; want the same 3", metrics.SchedulerE2EDuration, e2e, metrics.SchedulingDuration, own)
	}
	servetest.Series(t, fams, metrics.ExtensionInfo, nil)
}

func TestPoolGaugesReadTheStoreAtScrapeTime(t *testing.T) {
	m, _, store := picker(t)
	pool := map[string]string{"name": "llama-pool"}
	fams := servetest.Gather(t, m.Registry)
	checks := []struct {
		name string
		want float64
	}{
		{metrics.PoolAverageQueueSize, 3}, // (1+3+5)/3
		{metrics.PoolAverageKVCache, 0.3}, // (0.2+0.4)/2: the third reports none
		{metrics.PoolAverageRunningRequests, 2},
		{metrics.PoolReadyPods, 2}, // two pods, three endpoints
	}
	for _, c := range checks {
		if got := servetest.Series(t, fams, c.name, pool).GetGauge().GetValue(); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if got := servetest.Series(t, fams, metrics.PoolPerPodQueueSize, map[string]string{"name": "llama-pool", "model_server_pod": "10.0.0.2:8001"}).GetGauge().GetValue(); got != 5 {
		t.Errorf("per-pod queue of 10.0.0.2:8001 = %v, want 5", got)
	}
	if got := servetest.Series(t, fams, metrics.EndpointKVCache, map[string]string{"endpoint": "10.0.0.2:8000"}).GetGauge().GetValue(); got != 0.4 {
		t.Errorf("KV of 10.0.0.2:8000 = %v", got)
	}
	if n := len(fams[metrics.EndpointKVCache].GetMetric()); n != 2 {
		t.Errorf("%d KV series; the endpoint that reports no KV use must have none", n)
	}

	// A removed endpoint's series go with it.
	store.SetEndpoints([]datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}})
	if n := testutil.CollectAndCount(m.Registry, metrics.PoolPerPodQueueSize); n != 1 {
		t.Errorf("%d per-pod series after the pool shrank to one endpoint", n)
	}
}

func TestClientModelNamesAreBounded(t *testing.T) {
	m, client, _ := picker(t)
	for i := range metrics.MaxModelLabels + 20 {
		body := fmt.Sprintf(`{"model":"m-%d","prompt":"x"}`, i)
		req := extproctest.PostJSON("/v1/completions", []byte(body))
		req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200"), Chunks: [][]byte{[]byte(`{}`)}}
		if _, err := client.Process(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	fams := servetest.Gather(t, m.Registry)
	f := fams[metrics.ObjectiveRequests]
	if n := len(f.GetMetric()); n != metrics.MaxModelLabels+1 {
		t.Errorf("%d model series, want %d and %s", n, metrics.MaxModelLabels, metrics.OtherModelLabel)
	}
	if got := servetest.Series(t, fams, metrics.ObjectiveRequests, map[string]string{"model_name": metrics.OtherModelLabel}).GetCounter().GetValue(); got != 20 {
		t.Errorf("%s counted %v requests, want 20", metrics.OtherModelLabel, got)
	}
}
