package kubelog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// syncBuffer is a log destination safe for the libraries' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON records written so far; a line that is not JSON fails t.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a line of the log is not JSON: %q", l)
		}
		out = append(out, rec)
	}
	return out
}

// TestClientGoAndControllerRuntimeLogIntoTheJSONLog: what client-go reports
// (an error its reflectors hand to HandleError, a klog line) and what
// controller-runtime logs arrive in the process's JSON log as JSON records.
func TestClientGoAndControllerRuntimeLogIntoTheJSONLog(t *testing.T) {
	var buf syncBuffer
	RouteSlog(slog.New(slog.NewJSONHandler(&buf, nil)))

	utilruntime.HandleError(errors.New("failed to watch *v1.Pod: connection refused"))
	klog.InfoS("attempting to acquire leader lease", "lease", "default/pool-epp")
	ctrllog.Log.WithName("cache").Info("cache synced", "kind", "Pod")
	klog.Flush()

	want := map[string]string{
		"failed to watch *v1.Pod: connection refused": "ERROR",
		"attempting to acquire leader lease":          "INFO",
		"cache synced":                                "INFO",
	}
	for _, rec := range buf.lines(t) {
		for text, level := range want {
			msg, _ := rec["msg"].(string)
			errText, _ := rec["err"].(string)
			if (strings.Contains(msg, text) || strings.Contains(errText, text)) && rec["level"] == level {
				delete(want, text)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("not in the JSON log: %v\nlog:\n%s", want, buf.b.String())
	}
}
