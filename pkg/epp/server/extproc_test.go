package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/pkg/cputime"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/config/configtest"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/metrics"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/epp/server"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/wire"
)

type fixture struct {
	d      *director.Director
	keys   []string
	client *extproctest.Client
}

func start(t testing.TB, n int, cfg string) *fixture {
	t.Helper()
	return startBehind(t, n, cfg, extproctest.Config{})
}

// startBehind is start with Envoy's ext_proc filter configured as envoy says.
func startBehind(t testing.TB, n int, cfg string, envoy extproctest.Config) *fixture {
	t.Helper()
	var eps []datastore.Endpoint
	for i := range n {
		eps = append(eps, datastore.Endpoint{Address: fmt.Sprintf("10.1.0.%d", i+1), Port: 8000})
	}
	d := configtest.Director(t, cfg, director.Options{}, eps...)
	f := &fixture{d: d}
	for _, st := range d.Store().Endpoints(nil) {
		f.keys = append(f.keys, st.Key())
	}
	now := time.Now()
	for i, k := range f.keys {
		d.UpdateMetrics(k, datastore.Metrics{Waiting: i, SampledAt: now}, now)
	}
	f.client = extproctest.Start(t, &server.ExtProc{Director: d, Metrics: metrics.New()}, envoy)
	return f
}

func chatBody(size int) []byte {
	text := strings.Repeat("lorem ipsum ", size/12+1)
	b, _ := json.Marshal(map[string]any{"model": "llama", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	return b
}

func TestDestinationHeaderMetadataAndFallbacks(t *testing.T) {
	f := start(t, 4, "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 2")
	res, err := f.client.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", chatBody(1024)))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(f.keys[:3], ",") // queues 0 < 1 < 2 < 3
	if got := res.RequestHeaders.Get(wire.HeaderDestinationEndpoint); got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	if got := res.DynamicMetadata[wire.MetadataNamespaceLB][wire.MetadataKeyDestinationEndpoint]; got != want {
		t.Fatalf("metadata %v, want %q", res.DynamicMetadata, want)
	}
	if !res.RouteCacheCleared {
		t.Fatal("route cache not cleared")
	}
	if len(res.Ignored) > 0 {
		t.Fatalf("Envoy would ignore: %v", res.Ignored)
	}
}

func subset(keys ...string) *corev3.Metadata {
	vals := make([]any, len(keys))
	for i, k := range keys {
		vals[i] = k
	}
	s, _ := structpb.NewStruct(map[string]any{wire.MetadataKeyDestinationSubset: vals})
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{wire.MetadataNamespaceSubsetHint: s}}
}

func TestSubsetHint(t *testing.T) {
	f := start(t, 4, "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 2")
	req := extproctest.PostJSON("/v1/chat/completions", chatBody(100))
	req.MetadataContext = subset(f.keys[2], f.keys[3])
	res, err := f.client.Process(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.RequestHeaders.Get(wire.HeaderDestinationEndpoint); got != f.keys[2]+","+f.keys[3] {
		t.Fatalf("subset ignored: %q", got)
	}
	req.MetadataContext = subset("192.0.2.9:1")
	res, err = f.client.Process(context.Background(), req)
	if err != nil || res.ImmediateResponse == nil || res.ImmediateResponse.Status != 503 {
		t.Fatalf("unknown subset: %v %+v", err, res.ImmediateResponse)
	}
}

func TestNoEndpoints503(t *testing.T) {
	f := start(t, 0, config.Default)
	res, err := f.client.Process(context.Background(), extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"x"}`)))
	if err != nil {
		t.Fatal(err)
	}
	ir := res.ImmediateResponse
	if ir == nil || ir.Status != 503 || ir.Headers.Get(wire.HeaderContentType) != "application/json" {
		t.Fatalf("immediate %+v", ir)
	}
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if json.Unmarshal(ir.Body, &body) != nil || body.Error.Code != "no_healthy_upstream" || body.Error.Message == "" {
		t.Fatalf("body %s", ir.Body)
	}
}

func TestShed429WithRetryAfter(t *testing.T) {
	f := start(t, 2, config.Default+"admission: {maxWaitSeconds: 1}\ntrust: {priorityHeader: true}\n")
	now := time.Now()
	// Saturated (5 waiting) but not overloaded: a request of priority 0
	// would start within the admission's MaxWaitSeconds.
	for _, k := range f.keys {
		f.d.UpdateMetrics(k, datastore.Metrics{Waiting: 5, SampledAt: now}, now)
	}
	req := extproctest.PostJSON("/v1/chat/completions", chatBody(4000))
	req.Headers = append(req.Headers, extproctest.Header{Key: wire.HeaderPriority, Value: "-1"})
	res, err := f.client.Process(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ir := res.ImmediateResponse
	if ir == nil || ir.Status != 429 || ir.Headers.Get(wire.HeaderRetryAfter) == "" || !bytes.Contains(ir.Body, []byte("fleet_saturated")) {
		t.Fatalf("immediate %+v", ir)
	}
	// The same request at default priority is still routed.
	req.Headers = req.Headers[:len(req.Headers)-1]
	if res, err := f.client.Process(context.Background(), req); err != nil || res.ImmediateResponse != nil {
		t.Fatalf("priority 0 shed: %v %+v", err, res.ImmediateResponse)
	}
	// Overloaded (500 waiting: far over a second of queue everywhere): shed
	// whatever the priority.
	for _, k := range f.keys {
		f.d.UpdateMetrics(k, datastore.Metrics{Waiting: 500, SampledAt: now}, now)
	}
	res, err = f.client.Process(context.Background(), req)
	if err != nil || res.ImmediateResponse == nil || res.ImmediateResponse.Status != 429 || res.ImmediateResponse.Headers.Get(wire.HeaderRetryAfter) == "" {
		t.Fatalf("priority 0 on an overloaded fleet: %v %+v", err, res.ImmediateResponse)
	}
}

func TestBodyRoundTripsUnchanged(t *testing.T) {
	f := start(t, 3, config.Default)
	for _, size := range []int{1 << 10, 4 << 20} {
		body := chatBody(size)
		res, err := f.client.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", body))
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if !bytes.Equal(res.RequestBody, body) {
			t.Fatalf("%d-byte body changed: got %d bytes", size, len(res.RequestBody))
		}
		if res.RequestHeaders.Get(wire.HeaderDestinationEndpoint) == "" {
			t.Fatalf("%d bytes: no destination", size)
		}
	}
}

func TestBadBody400(t *testing.T) {
	f := start(t, 1, config.Default)
	res, err := f.client.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", []byte(`{"messages":`)))
	if err != nil || res.ImmediateResponse == nil || res.ImmediateResponse.Status != 400 {
		t.Fatalf("%v %+v", err, res.ImmediateResponse)
	}
}

func TestResponseChunksPassThroughAndFeedLearning(t *testing.T) {
	f := start(t, 1, config.Default+"trust: {debugHeader: true}\n")
	chunks := [][]byte{
		[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"),
		[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: {\"choi"),
		[]byte("ces\":[{\"delta\":{\"content\":\"c\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"),
	}
	req := extproctest.PostJSON("/v1/chat/completions", chatBody(200))
	req.Headers = append(req.Headers, extproctest.Header{Key: wire.HeaderDebug, Value: "1"})
	req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200", "content-type", "text/event-stream"), Chunks: chunks}
	res, err := f.client.Process(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.ResponseBody, bytes.Join(chunks, nil)) || len(res.ResponseChunks) != len(chunks) {
		t.Fatalf("response changed: %q", res.ResponseBody)
	}
	for i, c := range res.ResponseChunks {
		if !bytes.Equal(c.Body, chunks[i]) || c.EndOfStream != (i == len(chunks)-1) {
			t.Fatalf("chunk %d: %q eos=%v", i, c.Body, c.EndOfStream)
		}
	}
	bd := res.ResponseHeaders.Get(wire.HeaderScoreBreakdown)
	if !strings.HasPrefix(bd, "endpoint="+f.keys[0]+";reason=scored;") || !strings.Contains(bd, "predicted-latency=") {
		t.Fatalf("breakdown header %q", bd)
	}
	st := f.d.Store().Get(f.keys[0])
	var v datastore.View
	st.View(time.Now(), 0, &v)
	if v.InFlight != 0 || v.PendingFirstToken != 0 || st.Speed().PrefillSamples != 1 || st.Speed().DecodeSamples == 0 {
		t.Fatalf("accounting after the response: %+v speed %+v", v, st.Speed())
	}
	// Without the debug header there is no breakdown.
	req.Headers = req.Headers[:len(req.Headers)-1]
	res, _ = f.client.Process(context.Background(), req)
	if res.ResponseHeaders.Get(wire.HeaderScoreBreakdown) != "" {
		t.Fatal("breakdown without x-igw-debug")
	}
}

// TestUntrustedHeadersAreIgnored: by default a client's x-igw-debug gets no
// breakdown (it names endpoints and their scores) and its x-igw-priority does
// not change admission; a header named like the proxy's subset hint does not
// restrict the pick (the hint is read from the proxy's metadata only).
func TestUntrustedHeadersAreIgnored(t *testing.T) {
	f := start(t, 2, config.Default+"admission: {maxWaitSeconds: 1}\n")
	now := time.Now()
	for _, k := range f.keys {
		f.d.UpdateMetrics(k, datastore.Metrics{Waiting: 5, SampledAt: now}, now) // saturated, not overloaded
	}
	req := extproctest.PostJSON("/v1/chat/completions", chatBody(4000))
	req.Headers = append(req.Headers,
		extproctest.Header{Key: wire.HeaderDebug, Value: "1"},
		extproctest.Header{Key: wire.HeaderPriority, Value: "-1"},
		extproctest.Header{Key: wire.MetadataKeyDestinationSubset, Value: "192.0.2.9:1"})
	req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200")}
	res, err := f.client.Process(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ImmediateResponse != nil {
		t.Fatalf("a client-sent priority or subset header was acted on: %d %s", res.ImmediateResponse.Status, res.ImmediateResponse.Body)
	}
	if bd := res.ResponseHeaders.Get(wire.HeaderScoreBreakdown); bd != "" {
		t.Fatalf("breakdown for an untrusted x-igw-debug: %q", bd)
	}

	// The same request once the configuration trusts both headers: shed, and
	// (on a fleet with room) explained.
	p, err := config.Load([]byte(config.Default+"admission: {maxWaitSeconds: 1}\ntrust: {debugHeader: true, priorityHeader: true}\n"), plugins.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f.d.SetPipeline(p)
	if res, err = f.client.Process(context.Background(), req); err != nil || res.ImmediateResponse == nil || res.ImmediateResponse.Status != 429 {
		t.Fatalf("trusted priority -1 on a saturated fleet: %v %+v", err, res.ImmediateResponse)
	}
	for _, k := range f.keys {
		f.d.UpdateMetrics(k, datastore.Metrics{SampledAt: now}, now)
	}
	if res, err = f.client.Process(context.Background(), req); err != nil || res.ImmediateResponse != nil {
		t.Fatalf("trusted headers on an idle fleet: %v %+v", err, res.ImmediateResponse)
	}
	if bd := res.ResponseHeaders.Get(wire.HeaderScoreBreakdown); !strings.HasPrefix(bd, "endpoint=") {
		t.Fatalf("no breakdown for a trusted x-igw-debug: %q", bd)
	}
}

func TestAbortedStreamReleasesThePick(t *testing.T) {
	f := start(t, 1, config.Default)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := f.client.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(extproctest.RequestHeadersMessage(extproctest.NewHeaders(":method", "POST", ":path", "/v1/completions"), false))
	stream.Send(extproctest.RequestBodyMessage([]byte(`{"model":"m","prompt":"hello"}`), true))
	for range 2 { // headers reply, body reply
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	var v datastore.View
	st := f.d.Store().Get(f.keys[0])
	if st.View(time.Now(), 0, &v); v.InFlight != 1 {
		t.Fatalf("in flight %d", v.InFlight)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for st.View(time.Now(), 0, &v); v.InFlight != 0; st.View(time.Now(), 0, &v) {
		if time.Now().After(deadline) {
			t.Fatal("aborted stream still counted in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkRequestPath512KiB measures one exchange with a 512 KiB chat body
// (16 KiB chunks, full duplex, 128 endpoints) through real gRPC on loopback,
// against the passthrough server measured in the same run. It reports the
// picker's p99, the passthrough's p99 and their difference: the latency the
// picker adds to a request. On a shared machine wall-clock tails follow the
// neighbours, so it also reports the process CPU time the picker adds per
// request (mean), which they disturb much less.
func BenchmarkRequestPath512KiB(b *testing.B) {
	body := chatBody(512 << 10)
	f := start(b, 128, config.Default)
	base := extproctest.Start(b, extproctest.Passthrough{}, extproctest.Config{})
	resp := &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200"),
		Chunks: [][]byte{[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")}}
	ctx := context.Background()
	var cpu, baseCPU time.Duration
	run := func(c *extproctest.Client, cpuSum *time.Duration) time.Duration {
		req := extproctest.PostJSON("/v1/chat/completions", body)
		req.Response = resp
		c0, t0 := cputime.Process(), time.Now()
		res, err := c.Process(ctx, req)
		d := time.Since(t0)
		*cpuSum += cputime.Process() - c0
		if err != nil || res.ImmediateResponse != nil || len(res.RequestBody) != len(body) {
			b.Fatal(err, res.ImmediateResponse)
		}
		return d
	}
	lat := make([]time.Duration, 0, b.N)
	baseLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// Alternate the order, so that neither side always inherits the
		// other's garbage.
		if i%2 == 0 {
			lat = append(lat, run(f.client, &cpu))
			baseLat = append(baseLat, run(base, &baseCPU))
		} else {
			baseLat = append(baseLat, run(base, &baseCPU))
			lat = append(lat, run(f.client, &cpu))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(baseLat)
	p99, base99 := lat[len(lat)*99/100], baseLat[len(baseLat)*99/100]
	b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(base99.Microseconds())/1e3, "passthrough-p99-ms")
	b.ReportMetric(float64((p99-base99).Microseconds())/1e3, "added-p99-ms")
	b.ReportMetric(float64((lat[len(lat)/2]-baseLat[len(baseLat)/2]).Microseconds())/1e3, "added-p50-ms")
	b.ReportMetric(float64((cpu-baseCPU).Microseconds())/1e3/float64(b.N), "added-cpu-ms")
}

// failOpenEnvoy is how Envoy calls a picker whose route fails open: Envoy
// refuses failure_mode_allow with full-duplex bodies.
var failOpenEnvoy = extproctest.Config{RequestBodyMode: extproctest.Buffered, ResponseBodyMode: extproctest.Streamed}

func TestPicksWithABufferedRequestAndAStreamedResponse(t *testing.T) {
	f := startBehind(t, 3, "scorers: [{plugin: queue, weight: 1}]\nfallbacks: 1", failOpenEnvoy)
	body := chatBody(64 << 10)
	chunks := [][]byte{
		[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"),
		[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n"),
	}
	req := extproctest.PostJSON("/v1/chat/completions", body)
	req.Response = &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200", "content-type", "text/event-stream"), Chunks: chunks}
	// A picker that held its headers reply for the body would never get it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.client.Process(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(f.keys[:2], ",") // queues 0 < 1 < 2
	if got := res.RequestHeaders.Get(wire.HeaderDestinationEndpoint); got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	if got := res.DynamicMetadata[wire.MetadataNamespaceLB][wire.MetadataKeyDestinationEndpoint]; got != want {
		t.Fatalf("metadata %v, want %q", res.DynamicMetadata, want)
	}
	if !res.RouteCacheCleared || len(res.Ignored) > 0 {
		t.Fatalf("route cache cleared %v, ignored %v", res.RouteCacheCleared, res.Ignored)
	}
	if !bytes.Equal(res.RequestBody, body) || !bytes.Equal(res.ResponseBody, bytes.Join(chunks, nil)) || len(res.ResponseChunks) != len(chunks) {
		t.Fatalf("bodies changed: request %d of %d bytes, response %q", len(res.RequestBody), len(body), res.ResponseBody)
	}
	st := f.d.Store().Get(f.keys[0])
	var v datastore.View
	st.View(time.Now(), 0, &v)
	if v.InFlight != 0 || st.Speed().PrefillSamples != 1 {
		t.Fatalf("accounting after the response: %+v speed %+v", v, st.Speed())
	}

	// A request without a body is picked for from its headers.
	get, err := f.client.Process(context.Background(), extproctest.Request{Headers: extproctest.NewHeaders(":method", "GET", ":path", "/v1/models")})
	if err != nil || get.RequestHeaders.Get(wire.HeaderDestinationEndpoint) == "" {
		t.Fatalf("headers-only request: %v %v", err, get.RequestHeaders)
	}
	// Refusals are immediate responses in this mode too.
	bad, err := f.client.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", []byte(`{"messages":`)))
	if err != nil || bad.ImmediateResponse == nil || bad.ImmediateResponse.Status != 400 {
		t.Fatalf("malformed body: %v %+v", err, bad.ImmediateResponse)
	}
}
