package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"
)

// TestGRPCLogsIntoTheJSONLog: gRPC's log (through the component loggers its
// packages use) arrives as JSON records, at gRPC's default severity: errors
// only.
func TestGRPCLogsIntoTheJSONLog(t *testing.T) {
	t.Setenv("GRPC_GO_LOG_SEVERITY_LEVEL", "")
	var buf bytes.Buffer
	RouteGRPC(slog.New(slog.NewJSONHandler(&buf, nil)))
	c := grpclog.Component("transport")
	c.Errorf("http2Server: %s", "connection reset")
	c.Warningf("not shown at the default severity")
	c.Info("not shown either")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one record, got:\n%s", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q", lines[0])
	}
	if rec["level"] != "ERROR" || rec["logger"] != "grpc" || !strings.Contains(rec["msg"].(string), "http2Server: connection reset") {
		t.Fatalf("record %v", rec)
	}

	t.Setenv("GRPC_GO_LOG_SEVERITY_LEVEL", "warning")
	buf.Reset()
	RouteGRPC(slog.New(slog.NewJSONHandler(&buf, nil)))
	c.Warning("shown at warning")
	c.Info("still not shown")
	if got := buf.String(); !strings.Contains(got, `"level":"WARN"`) || strings.Contains(got, "still not shown") {
		t.Fatalf("at warning severity the log is:\n%s", got)
	}
}
