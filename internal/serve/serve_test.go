package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/internal/servetest"
)

func TestGroupServesReportsAndStops(t *testing.T) {
	h := NewHealth()
	var order []string
	g := &Group{Host: "127.0.0.1"}
	g.GRPC("health", 0, h.Server(), 0)
	ready := true
	g.HTTP("metrics", 0, &http.Server{Handler: ProbeMux(http.NotFoundHandler(), func() (bool, map[string]any) {
		return ready, map[string]any{"n": 1}
	})}, time.Second)
	loopEnded := make(chan struct{})
	g.Go("loop", func(ctx context.Context) error { <-ctx.Done(); close(loopEnded); return nil })
	g.Started = func() { order = append(order, "started"); h.Set(true) }
	g.Stopping = func() {
		select {
		case <-loopEnded:
			order = append(order, "stopping after the loops")
		case <-time.After(5 * time.Second):
			order = append(order, "stopping before the loops ended")
		}
		h.Shutdown()
	}
	stop := servetest.Start(t, "the group", g.Run)

	for _, svc := range []string{"", ExtProcService} {
		if st := servetest.Health(t, g.Addr("health"), svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v", svc, st)
		}
	}
	get := func(path string) (int, string) {
		a := servetest.Get(t, "http://"+g.Addr("metrics")+path)
		return a.Status, string(a.Body)
	}
	if code, body := get("/readyz"); code != 200 || strings.TrimSpace(body) != `{"detail":{"n":1},"ready":true}` {
		t.Fatalf("readyz %d %s", code, body)
	}
	ready = false
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"ready":false`) {
		t.Fatalf("readyz when not ready: %d %s", code, body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after ctx ended: %v", err)
	}
	if strings.Join(order, ", ") != "started, stopping after the loops" {
		t.Fatalf("hooks ran as %v", order)
	}
	if _, err := net.DialTimeout("tcp", g.Addr("metrics"), time.Second); err == nil {
		t.Fatal("the metrics port is still open after Run returned")
	}
}

func TestGroupFailsStartWhenAPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	g := &Group{Host: "127.0.0.1"}
	first := &http.Server{}
	g.HTTP("first", 0, first, 0)
	g.HTTP("second", port, &http.Server{}, 0)
	started := false
	g.Go("loop", func(context.Context) error { started = true; return nil })
	err = g.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "listen for second") {
		t.Fatalf("Run = %v, want the second listener's failure", err)
	}
	if started {
		t.Fatal("a loop started although a port could not be opened")
	}
	if g.Addr("first") != "" {
		t.Fatal("an address is reported for a group that never served")
	}
}

func TestGroupStopsOnALoopFailureAndCutsLongRequests(t *testing.T) {
	fail := make(chan struct{})
	inFlight := make(chan struct{})
	g := &Group{Host: "127.0.0.1"}
	g.HTTP("http", 0, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inFlight)
		<-r.Context().Done() // never finishes by itself
	})}, 50*time.Millisecond)
	g.Go("watch", func(ctx context.Context) error {
		select {
		case <-fail:
			return errors.New("file gone")
		case <-ctx.Done():
			return nil
		}
	})
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- g.Run(context.Background(), ready) }()
	<-ready
	reqDone := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + g.Addr("http"))
		if err == nil {
			resp.Body.Close()
		}
		reqDone <- err
	}()
	<-inFlight
	close(fail)
	select {
	case err := <-done:
		if err == nil || err.Error() != "watch: file gone" {
			t.Fatalf("Run = %v, want the loop's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop after a loop failed and the drain time passed")
	}
	if err := <-reqDone; err == nil {
		t.Fatal("the request outliving the drain time was not cut")
	}
}

func TestCheckPortsReportsRangeAndRepeatsInOrder(t *testing.T) {
	errs := CheckPorts([]Port{{"--a", 9000}, {"--b", 0}, {"--c", 9000}, {"--d", 0}, {"--e", 70000}})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if want := "--a and --c are both 9000; --e 70000 is out of range"; strings.Join(got, "; ") != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
