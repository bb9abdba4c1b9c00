package proc

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestStartReportsAnEarlyExitWithItsStderr(t *testing.T) {
	_, err := Start(context.Background(), "failing", "/bin/sh", []string{"-c", "echo no model named x >&2; exit 3"}, "/health")
	if err == nil || !strings.Contains(err.Error(), "failing") || !strings.Contains(err.Error(), "no model named x") {
		t.Fatalf("error %v, want the name and the process's stderr", err)
	}
}

func TestStartGivesUpWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Start(ctx, "silent", "/bin/sh", []string{"-c", "sleep 30"}, "/health")
	if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("error %v, want the context's", err)
	}
}

func TestInDirNamesTheBuildCommand(t *testing.T) {
	if _, err := InDir(t.TempDir(), "modelsim"); err == nil || !strings.Contains(err.Error(), "go build -o") {
		t.Fatalf("error %v, want how to build the binary", err)
	}
}
