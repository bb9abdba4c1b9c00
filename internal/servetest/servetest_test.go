package servetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// A run that fails before it is ready fails the test; a ready one is stopped
// by its context and reports how it ended.
func TestStartWaitsForReadyAndStopEndsTheRun(t *testing.T) {
	ended := errors.New("ended")
	stop := Start(t, "server", func(ctx context.Context, ready chan<- struct{}) error {
		close(ready)
		<-ctx.Done()
		return ended
	})
	if err := stop(); !errors.Is(err, ended) {
		t.Fatalf("stop returned %v, want the run's error", err)
	}

	early := &recordingTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Start(early, "broken server", func(context.Context, chan<- struct{}) error { return errors.New("port in use") })
	}()
	if early.fatal != "broken server stopped before serving: port in use" {
		t.Fatalf("early exit reported as %q", early.fatal)
	}
}

// recordingTB records Fatalf instead of failing the test (and panics to stop
// the caller, as FailNow would).
type recordingTB struct {
	testing.TB
	fatal string
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic("fatal")
}
