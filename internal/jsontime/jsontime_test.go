package jsontime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationRoundTrip(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Duration != 90*time.Second {
		t.Fatalf("read %v, want 1m30s", d.Duration)
	}
	out, err := json.Marshal(d)
	if err != nil || string(out) != `"1m30s"` {
		t.Fatalf("wrote %s %v, want \"1m30s\"", out, err)
	}
}

func TestDurationRejects(t *testing.T) {
	for _, in := range []string{`5`, `"soon"`, `"-1s"`, `null`} {
		var d Duration
		err := json.Unmarshal([]byte(in), &d)
		if err == nil || !strings.Contains(err.Error(), `want a duration such as "500ms" or "2s"`) {
			t.Errorf("%s: error %v, want the expected form", in, err)
		}
	}
}
