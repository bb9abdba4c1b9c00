package frontdoor

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// answer posts body to srv and returns the status and the OpenAI error code.
func answer(t *testing.T, srv *httptest.Server, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code
}

// Enter admits within the concurrency cap and reads the body within the
// size limit and the memory budget; leave gives both back. Guard removes an
// untrusted client's reserved headers before the handler sees them.
func TestEnterAndGuard(t *testing.T) {
	o := Defaults()
	o.MaxConcurrentRequests, o.MaxBodyBytes, o.MaxBufferedBytes = 1, 16, 64
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	d := New(&o, "test server")
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var (
		mu   sync.Mutex
		seen http.Header
	)
	handler := d.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, leave, ok := d.Enter(w, r)
		if !ok {
			return
		}
		defer leave()
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		if string(body) == "hold" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	srv := httptest.NewServer(d.Server(handler, slog.New(slog.DiscardHandler)).Handler)
	defer srv.Close()

	code, _ := answer(t, srv, "ok", "X-Igw-Priority", "9", "X-Other", "kept")
	mu.Lock()
	if code != http.StatusOK || seen.Get("X-Igw-Priority") != "" || seen.Get("X-Other") != "kept" {
		t.Errorf("%d, headers %v: want 200, x-igw-priority removed from an untrusted client, others kept", code, seen)
	}
	mu.Unlock()
	if code, c := answer(t, srv, strings.Repeat("x", 17)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d %s, want 413", code, c)
	}
	if d.Buffered() != 0 || d.InFlight() != 0 {
		t.Errorf("after the requests: %d bytes buffered, %d in flight, want none", d.Buffered(), d.InFlight())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader("hold")); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if d.Buffered() != bodyCost(4) || d.InFlight() != 1 {
		t.Errorf("while a request is in: %d bytes buffered, %d in flight, want %d and 1", d.Buffered(), d.InFlight(), bodyCost(4))
	}
	if code, c := answer(t, srv, "ok"); code != http.StatusTooManyRequests || c != "too_many_concurrent_requests" {
		t.Errorf("over the concurrency cap: %d %s, want 429 too_many_concurrent_requests", code, c)
	}
	close(release)
	<-done
	if d.Buffered() != 0 || d.InFlight() != 0 {
		t.Errorf("after leave: %d bytes buffered, %d in flight, want none", d.Buffered(), d.InFlight())
	}
}
