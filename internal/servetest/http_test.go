package servetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Get and Post return the whole answer; Post sends its body as JSON.
func TestGetAndPostReadTheWholeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+"|"+r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s", r.URL.Path, b)
	}))
	defer srv.Close()
	if a := Get(t, srv.URL+"/g"); a.Status != http.StatusTeapot || string(a.Body) != "/g " || a.Header.Get("X-Seen") != "GET|" {
		t.Fatalf("Get: %d %q %q", a.Status, a.Body, a.Header.Get("X-Seen"))
	}
	if a := Post(t, srv.URL+"/p", `{"a":1}`); string(a.Body) != `/p {"a":1}` || a.Header.Get("X-Seen") != "POST|application/json" {
		t.Fatalf("Post: %d %q %q", a.Status, a.Body, a.Header.Get("X-Seen"))
	}
}

// Metrics reads a Prometheus exposition into families by name.
func TestMetricsParsesTheExposition(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE requests_total counter\nrequests_total{code=\"200\"} 7\n")
	}))
	defer srv.Close()
	f := Metrics(t, srv.URL)["requests_total"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter().GetValue() != 7 {
		t.Fatalf("requests_total: %v", f)
	}
}
