package globalsummary

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/wire"
)

const (
	tokenA = "0123456789abcdef0123456789abcdef"
	tokenB = "fedcba9876543210fedcba9876543210"
)

// TestHandlerOverHTTP serves a picker's summary on a real HTTP server and
// fetches it with the hub's client: the right token reads it, a wrong or
// missing one gets a 401 that is not taken for garbage, a rotated Secret
// takes effect, and an unchanged document is built once per interval.
func TestHandlerOverHTTP(t *testing.T) {
	dir := t.TempDir()
	serverTokens := testfile.Write(t, dir, "server", "# rotated 2026-05\n"+tokenA+"\n")
	clientToken := testfile.Write(t, dir, "client", tokenA+"\n")
	auth, err := NewTokenFile(serverTokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, hashes := pool(t)
	exp := NewExporter(ExporterOptions{Cluster: "use1", Region: "us-east-1"}, func() []Source { return []Source{src} })
	builds := 0
	h, err := NewHandler(func(now time.Time) *Summary { builds++; return exp.Summary(t0) }, HandlerOptions{Auth: auth, MinInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.GlobalSummaryPath, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	url := srv.URL + wire.GlobalSummaryPath
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c := &Client{HTTP: srv.Client(), TokenFile: clientToken}
	s, err := c.Fetch(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster != "use1" || s.Find("llama") == nil || s.Find("llama").Digest.MatchLeading(hashes) != 5 {
		t.Fatalf("fetched %+v", s)
	}
	if _, err := c.Fetch(ctx, url); err != nil || builds != 1 {
		t.Fatalf("second fetch: %v, %d builds (want 1 within the interval)", err, builds)
	}

	// Rotation: the Secret now holds B only; the client still sends A.
	testfile.Write(t, dir, "server", tokenB+"\n")
	if err := auth.file.Load(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(ctx, url)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Garbage || !strings.Contains(err.Error(), "status 401") || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("old token: %v", err)
	}
	testfile.Write(t, dir, "client", tokenB)
	if _, err := c.Fetch(ctx, url); err != nil {
		t.Fatalf("rotated token: %v", err)
	}

	// A token file emptied by mistake keeps the tokens in effect.
	testfile.Write(t, dir, "server", "\n")
	if err := auth.file.Load(); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("empty token file accepted: %v", err)
	}
	if _, err := c.Fetch(ctx, url); err != nil {
		t.Fatalf("after an emptied file: %v", err)
	}

	for _, tc := range []struct {
		name, method, auth string
		want               int
	}{
		{"no header", http.MethodGet, "", http.StatusUnauthorized},
		{"basic", http.MethodGet, "Basic " + tokenB, http.StatusUnauthorized},
		{"prefix of the token", http.MethodGet, "Bearer " + tokenB[:20], http.StatusUnauthorized},
		{"lower-case scheme", http.MethodGet, "bearer " + tokenB, http.StatusOK},
		{"head", http.MethodHead, "Bearer " + tokenB, http.StatusOK},
		{"post", http.MethodPost, "Bearer " + tokenB, http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, url, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no WWW-Authenticate challenge", tc.name)
		}
	}
}

// TestNoTokenFileRefusesEverything: before a valid token file exists nothing
// is served, and a handler without an authenticator cannot be built.
func TestNoTokenFileRefusesEverything(t *testing.T) {
	dir := t.TempDir()
	auth, err := NewTokenFile(filepath.Join(dir, "missing"), nil)
	if err == nil {
		t.Fatal("a missing token file loaded")
	}
	h, err := NewHandler(func(time.Time) *Summary { t.Fatal("built a summary for nobody"); return nil }, HandlerOptions{Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, wire.GlobalSummaryPath, nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "no summary token in effect") {
		t.Fatalf("status %d body %s", rec.Code, rec.Body)
	}
	if _, err := NewHandler(nil, HandlerOptions{}); err == nil {
		t.Fatal("a handler without authentication was built")
	}
	for _, bad := range []string{"short", "two words-0123456789abcdef"} {
		if _, err := ParseTokens([]byte(bad)); err == nil {
			t.Errorf("token file %q accepted", bad)
		}
	}
}

// TestClientTellsGarbageFromSilence: a member answering 200 with a document
// that does not decode is garbage; one that does not answer is not.
func TestClientTellsGarbageFromSilence(t *testing.T) {
	tok := testfile.Write(t, "", "token", tokenA)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":1,"cluster":"x","models":[{"model":"m","waiting":-3}]}`))
	}))
	c := &Client{HTTP: srv.Client(), TokenFile: tok}
	ctx := context.Background()
	_, err := c.Fetch(ctx, srv.URL)
	var fe *FetchError
	if !errors.As(err, &fe) || !fe.Garbage || !strings.Contains(err.Error(), "generatedAt is required") {
		t.Fatalf("garbage: %v", err)
	}
	srv.Close()
	_, err = c.Fetch(ctx, srv.URL)
	if !errors.As(err, &fe) || fe.Garbage {
		t.Fatalf("unreachable: %v", err)
	}
}
