package bbr

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
	"github.com/igw-dev/igw/pkg/wire"
)

func jsonHeaders(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

var testAdapters = map[string]string{
	"sql-lora":                 "meta-llama/Llama-3.1-8B-Instruct",
	"gpt-oss-120b-lora-pirate": "openai/gpt-oss-120b",
}

func TestRouteRealBodies(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 8 << 20})
	r.SetAdapters(testAdapters)
	for _, b := range bodytest.All() {
		t.Run(b.Name, func(t *testing.T) {
			d, err := r.Route(jsonHeaders(wire.HeaderPath, b.Path, wire.HeaderContentLength, strconv.Itoa(len(b.Body))), b.Body)
			if err != nil {
				t.Fatalf("Route: %v", err)
			}
			if d.PassThrough || d.Model != b.Model || d.BaseModel != testAdapters[b.Model] || d.Defaulted {
				t.Fatalf("decision %+v; want model %q base %q", d, b.Model, testAdapters[b.Model])
			}
		})
	}
}

// TestRouteScannedDecidesAsRoute: handed the scan the picker's parser made,
// the router decides as it does scanning the body itself, errors included.
func TestRouteScannedDecidesAsRoute(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 8 << 20, DefaultModel: "fallback"})
	r.SetAdapters(testAdapters)
	var p requestbody.Parser
	bodies := [][]byte{nil, []byte(`{"model":"sql-lora"}`), []byte(`{"model":null}`), []byte(`{"model":3}`),
		[]byte(`[1]`), []byte(`{"model":"a",}`), []byte(`{"model":"a\x"}`), []byte("{\"model\":\"a\x01\"}"), []byte(`{"model":"` + strings.Repeat("m", MaxModelNameBytes+1) + `"}`)}
	for _, b := range bodytest.All() {
		bodies = append(bodies, b.Body)
	}
	for _, h := range []http.Header{jsonHeaders(), {"Content-Type": {"text/plain"}}} {
		for _, body := range bodies {
			want, wantErr := r.Route(h, body)
			got, gotErr := r.RouteScanned(h, body, p.Scan(body))
			if got != want || (gotErr == nil) != (wantErr == nil) || gotErr != nil && *gotErr != *wantErr {
				t.Fatalf("%.80q: RouteScanned %+v %v; Route %+v %v", body, got, gotErr, want, wantErr)
			}
		}
	}
}

// wantError checks an error is the OpenAI-shaped one a client should get.
func wantError(t *testing.T, e *apierror.Error, status int, code, messagePart string) {
	t.Helper()
	if e == nil {
		t.Fatalf("no error; want %d %s", status, code)
	}
	if e.Status != status || e.Code != code || !strings.Contains(e.Message, messagePart) {
		t.Fatalf("error %d %q %q; want %d %q containing %q", e.Status, e.Code, e.Message, status, code, messagePart)
	}
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(e.JSON(), &body); err != nil || body.Error.Message != e.Message || body.Error.Code == nil || *body.Error.Code != code || body.Error.Type == "" {
		t.Fatalf("error body %s: %v", e.JSON(), err)
	}
}

func TestRouteErrors(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 1000})
	long := `{"model":"` + strings.Repeat("m", MaxModelNameBytes+1) + `"}`
	for _, tc := range []struct {
		name, body           string
		headers              http.Header
		status               int
		code, message, param string
	}{
		{"syntax error", `{"model":"a",}`, nil, 400, "invalid_json", "not valid JSON: invalid character '}'", ""},
		{"error after the model", `{"model":"a","x":[1,2}`, nil, 400, "invalid_json", "not valid JSON", ""},
		{"truncated", `{"model":"a","messages":[`, nil, 400, "invalid_json", "unexpected end of JSON input", ""},
		{"trailing data", `{"model":"a"} {}`, nil, 400, "invalid_json", "after top-level value", ""},
		{"array", `[{"model":"a"}]`, nil, 400, "invalid_json", "must be a JSON object", ""},
		{"string document", `"model"`, nil, 400, "invalid_json", "must be a JSON object", ""},
		{"missing", `{"messages":[]}`, nil, 400, "missing_model", "must provide a model", "model"},
		{"null", `{"model":null}`, nil, 400, "missing_model", "must provide a model", "model"},
		{"empty", `{"model":""}`, nil, 400, "missing_model", "must provide a model", "model"},
		{"only nested", `{"a":{"model":"x"}}`, nil, 400, "missing_model", "must provide a model", "model"},
		{"number", `{"model":7}`, nil, 400, "invalid_type", "expected a string, but got a number instead", "model"},
		{"boolean", `{"model":true}`, nil, 400, "invalid_type", "got a boolean", "model"},
		{"object", `{"model":{"name":"x"}}`, nil, 400, "invalid_type", "got an object", "model"},
		{"array model", `{"model":["x"]}`, nil, 400, "invalid_type", "got an array", "model"},
		{"last duplicate wins", `{"model":"a","model":3}`, nil, 400, "invalid_type", "got a number", "model"},
		{"control character", `{"model":"a\nb"}`, nil, 400, "invalid_model", "control characters", "model"},
		{"long model over the body limit", long, http.Header{"Content-Type": {"application/json"}}, 413, "request_too_large", "limit of 1000 bytes", ""},
		{"declared too large", `{"model":"a"}`, jsonHeaders(wire.HeaderContentLength, "1001"), 413, "request_too_large", "1000", ""},
		{"over the limit", `{"model":"a","p":"` + strings.Repeat("x", 1000) + `"}`, nil, 413, "request_too_large", "1000", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.headers
			if h == nil {
				h = jsonHeaders()
			}
			d, e := r.Route(h, []byte(tc.body))
			wantError(t, e, tc.status, tc.code, tc.message)
			if e.Param != tc.param {
				t.Fatalf("param %q, want %q", e.Param, tc.param)
			}
			if d != (Decision{}) {
				t.Fatalf("a decision came with the error: %+v", d)
			}
		})
	}
	t.Run("model name over the header bound", func(t *testing.T) {
		big := NewRouter(RouterConfig{})
		_, e := big.Route(jsonHeaders(), []byte(long))
		wantError(t, e, 400, "invalid_model", "longer than 1024 bytes")
	})
}

func TestRouteContentTypes(t *testing.T) {
	r := NewRouter(RouterConfig{})
	body := []byte(`{"model":"m"}`)
	for ct, routed := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"application/merge-patch+json":      true,
		"":                                  false,
		"text/plain":                        false,
		"multipart/form-data; boundary=x":   false,
		"application/x-www-form-urlencoded": false,
		"application/jsonl":                 false,
		"not a media type;;":                false,
	} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		d, e := r.Route(h, body)
		if e != nil || d.PassThrough == routed || (routed && d.Model != "m") {
			t.Errorf("content type %q: decision %+v, error %v; want routed=%v", ct, d, e, routed)
		}
	}
	// A body that is not JSON at all passes untouched under another content type.
	if d, e := r.Route(http.Header{"Content-Type": {"text/plain"}}, []byte("model: m")); e != nil || !d.PassThrough {
		t.Fatalf("text body: %+v %v", d, e)
	}
	// No body (a GET, or a POST without one): nothing to route on.
	if d, e := r.Route(jsonHeaders(), nil); e != nil || !d.PassThrough {
		t.Fatalf("empty body: %+v %v", d, e)
	}
}

func TestDefaultModel(t *testing.T) {
	r := NewRouter(RouterConfig{DefaultModel: "sql-lora"})
	r.SetAdapters(testAdapters)
	for _, body := range []string{`{"prompt":"hi"}`, `{"model":null}`, `{"model":""}`} {
		d, e := r.Route(jsonHeaders(), []byte(body))
		if e != nil || d.Model != "sql-lora" || !d.Defaulted || d.BaseModel != testAdapters["sql-lora"] {
			t.Fatalf("%s: %+v %v", body, d, e)
		}
	}
	if d, e := r.Route(jsonHeaders(), []byte(`{"model":"other"}`)); e != nil || d.Model != "other" || d.Defaulted {
		t.Fatalf("a model in the body must win over the default: %+v %v", d, e)
	}
	// The default is for a missing model, not for a broken one.
	_, e := r.Route(jsonHeaders(), []byte(`{"model":1}`))
	wantError(t, e, 400, "invalid_type", "number")
}

func TestDecisionApply(t *testing.T) {
	h := http.Header{}
	h.Set(wire.HeaderModelName, "spoofed")
	h.Set(wire.HeaderBaseModelName, "spoofed-base")
	Decision{Model: "llama"}.Apply(h)
	if h.Get(wire.HeaderModelName) != "llama" || h.Values(wire.HeaderBaseModelName) != nil {
		t.Fatalf("a base model model must drop a client's base model header: %v", h)
	}
	Decision{Model: "sql-lora", BaseModel: "llama"}.Apply(h)
	if h.Get(wire.HeaderModelName) != "sql-lora" || h.Get(wire.HeaderBaseModelName) != "llama" {
		t.Fatalf("adapter: %v", h)
	}
	untouched := http.Header{"X-Gateway-Model-Name": {"client"}}
	Decision{PassThrough: true}.Apply(untouched)
	if untouched.Get(wire.HeaderModelName) != "client" || len(untouched) != 1 {
		t.Fatalf("pass-through changed headers: %v", untouched)
	}
}

func TestSessionRefusesEarly(t *testing.T) {
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 100})
	t.Run("413 on the chunk that crosses the limit", func(t *testing.T) {
		s, e := r.Begin(jsonHeaders())
		if e != nil {
			t.Fatal(e)
		}
		if e := s.Write([]byte(`{"model":"m","p":"` + strings.Repeat("x", 60))); e != nil {
			t.Fatalf("under the limit: %v", e)
		}
		e = s.Write([]byte(strings.Repeat("x", 30)))
		wantError(t, e, 413, "request_too_large", "100")
		if len(s.Body()) > 100 {
			t.Fatalf("kept %d bytes past the limit", len(s.Body()))
		}
	})
	t.Run("400 as soon as the body cannot be JSON", func(t *testing.T) {
		s, _ := r.Begin(jsonHeaders())
		if e := s.Write([]byte(`{"model":"m",`)); e != nil {
			t.Fatal(e)
		}
		wantError(t, s.Write([]byte(`]`)), 400, "invalid_json", "invalid character ']'")
	})
	t.Run("the body is kept as it came", func(t *testing.T) {
		s, _ := r.Begin(jsonHeaders(wire.HeaderContentLength, "23"))
		for _, c := range []string{`{"mo`, `del":"m",`, ``, `"n":[1,2]}`} {
			if e := s.Write([]byte(c)); e != nil {
				t.Fatal(e)
			}
		}
		if d, e := s.Finish(); e != nil || d.Model != "m" || string(s.Body()) != `{"model":"m","n":[1,2]}` {
			t.Fatalf("%+v %v %q", d, e, s.Body())
		}
	})
}

func TestSetAdaptersWhileRouting(t *testing.T) {
	r := NewRouter(RouterConfig{})
	body := []byte(`{"model":"sql-lora"}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			if i%2 == 0 {
				r.SetAdapters(testAdapters)
			} else {
				r.SetAdapters(nil)
			}
		}
	}()
	for range 1000 {
		d, e := r.Route(jsonHeaders(), body)
		if e != nil || (d.BaseModel != "" && d.BaseModel != testAdapters["sql-lora"]) {
			t.Fatalf("%+v %v", d, e)
		}
	}
	<-done
}

// counter returns the value of the series of name with the given labels (0
// before it is first counted).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return servetest.Value(servetest.FindSeries(servetest.Gather(t, reg), name, labels))
}

func TestMetricsCountOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRouter(RouterConfig{MaxRequestBodyBytes: 64, Metrics: NewMetrics(reg)})
	r.Route(jsonHeaders(), []byte(`{"model":"a"}`))
	r.Route(jsonHeaders(), []byte(`{"model":"a"}`))
	r.Route(jsonHeaders(), []byte(`{"model":"b"}`))
	r.Route(jsonHeaders(), []byte(`{"model":1}`))
	r.Route(jsonHeaders(), []byte(`{`))
	r.Route(jsonHeaders(), []byte(`{}`))
	r.Route(http.Header{"Content-Type": {"text/plain"}}, []byte(`x`))
	r.Route(jsonHeaders(), []byte(`{"model":"a","p":"`+strings.Repeat("x", 64)+`"}`))
	for _, tc := range []struct {
		model, outcome string
		want           float64
	}{
		{"a", OutcomeRouted, 2},
		{"b", OutcomeRouted, 1},
		{"", OutcomeInvalidModel, 1},
		{"", OutcomeInvalidJSON, 1},
		{"", OutcomeMissingModel, 1},
		{"", OutcomePassThrough, 1},
		{"", OutcomeTooLarge, 1},
	} {
		if got := counter(t, reg, MetricRequests, map[string]string{"model": tc.model, "outcome": tc.outcome}); got != tc.want {
			t.Errorf("%s{model=%q,outcome=%q} = %v, want %v", MetricRequests, tc.model, tc.outcome, got, tc.want)
		}
	}
	// Every body that was scanned is timed: three routed, three refused after parsing.
	if got := counter(t, reg, MetricParseDuration, nil); got != 6 {
		t.Errorf("%s has %v samples, want 6", MetricParseDuration, got)
	}
}

func TestModelLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRouter(RouterConfig{Metrics: NewMetrics(reg)})
	for i := range MaxModelLabels + 10 {
		r.Route(jsonHeaders(), []byte(`{"model":"m`+strconv.Itoa(i)+`"}`))
	}
	if got := counter(t, reg, MetricRequests, map[string]string{"model": OtherModelLabel}); got != 10 {
		t.Fatalf("%v requests counted under %s, want 10", got, OtherModelLabel)
	}
}
