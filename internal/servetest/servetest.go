// Package servetest runs a server for a test through the lifecycle every igw
// server has (the EPP and BBR runners, the standalone gateway; see
// internal/serve): Run(ctx, ready) serves until ctx ends and closes ready
// once it listens. It also waits for what such a server does in the
// background, and reads its HTTP answers whole (http.go).
package servetest

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/internal/command"
)

// Build completes and validates o, as the command line would after its
// flags, and builds the server from it, logging nowhere; invalid options or
// a failed build fail t.
func Build[O command.Options, S any](t testing.TB, o O, build func(O, *slog.Logger) (S, error)) S {
	t.Helper()
	if err := command.Check(o); err != nil {
		t.Fatal(err)
	}
	s, err := build(o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RunFunc is a server's Run.
type RunFunc func(ctx context.Context, ready chan<- struct{}) error

// Start runs run in the background and returns once it is ready; a run that
// ends first fails the test, naming what it runs. stop ends the run and
// returns its error.
func Start(t testing.TB, what string, run RunFunc) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- run(ctx, ready) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("%s stopped before serving: %v", what, err)
	}
	return func() error { cancel(); return <-done }
}

// Serve is Start with the run ended when the test ends, which fails if the
// run returned an error.
func Serve(t testing.TB, what string, run RunFunc) {
	t.Helper()
	stop := Start(t, what, run)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// WaitFor polls cond every few milliseconds until it holds and returns how
// long that took; it fails t when timeout passes first.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > timeout {
			t.Fatalf("gave up waiting for %s after %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}

// Health is the grpc.health.v1 status the server at addr reports for
// service; UNKNOWN when it does not answer within 5 s.
func Health(t testing.TB, addr, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return res.GetStatus()
}

// FreeAddr is a loopback address with a port nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FreePort is the port of FreeAddr, for options that take a port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
