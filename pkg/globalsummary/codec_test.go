package globalsummary

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validSummary() *Summary {
	h := 0.4
	d := NewDigest(128, 10, 0)
	d.Add(42)
	return &Summary{
		Version: Version, Cluster: "use1", Region: "us-east-1",
		GeneratedAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Sequence: 7,
		Models: []Model{{
			Model: "llama", Adapters: []string{"sql"}, Endpoints: 4, ReadyEndpoints: 3,
			Waiting: 2, Running: 10, QueuedPrefillTokens: 5000,
			PrefillTokensPerSecond: 60000, EndpointPrefillTokensPerSecond: 20000, DecodeStepSeconds: 0.01,
			KVHeadroom: &h, KVCapacityTokens: 1 << 20, ErrorRate: 0.01, Requests: 100, Digest: d,
		}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	s := validSummary()
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the document:\n%+v\n%+v", got, s)
	}
	if !got.Models[0].Digest.Has(42) {
		t.Fatal("the digest lost its block")
	}
}

// TestDecodeRejectsGarbage: each kind of bad document is refused with an
// error that names what is wrong.
func TestDecodeRejectsGarbage(t *testing.T) {
	good, _ := Encode(validSummary())
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	model := func(m map[string]any) map[string]any { return m["models"].([]any)[0].(map[string]any) }
	cases := []struct{ name, doc, want string }{
		{"empty", "", "not a JSON object"},
		{"array", "[]", "not a JSON object"},
		{"null", "null", "not a JSON object"},
		{"html", "<html>502 Bad Gateway</html>", "not a JSON object"},
		{"truncated", string(good[:len(good)/2]), "unexpected EOF"},
		{"trailing", string(good) + "{}", "data after the document"},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), `unknown field "extra"`},
		{"unknown model field", edit(func(m map[string]any) { model(m)["queue"] = 1 }), `unknown field "queue"`},
		{"wrong version", edit(func(m map[string]any) { m["version"] = 2 }), "version is 2"},
		{"no version", edit(func(m map[string]any) { delete(m, "version") }), "version is 0"},
		{"no cluster", edit(func(m map[string]any) { delete(m, "cluster") }), "cluster is required"},
		{"no time", edit(func(m map[string]any) { delete(m, "generatedAt") }), "generatedAt is required"},
		{"bad time", edit(func(m map[string]any) { m["generatedAt"] = "yesterday" }), "generatedAt"},
		{"no models", edit(func(m map[string]any) { delete(m, "models") }), "models is required"},
		{"duplicate model", edit(func(m map[string]any) { m["models"] = append(m["models"].([]any), m["models"].([]any)[0]) }), `models[1]: model "llama" is also models[0]`},
		{"string count", edit(func(m map[string]any) { model(m)["waiting"] = "2" }), "waiting"},
		{"negative queue", edit(func(m map[string]any) { model(m)["waiting"] = -1 }), "must not be negative"},
		{"ready > endpoints", edit(func(m map[string]any) { model(m)["readyEndpoints"] = 9 }), "readyEndpoints 9"},
		{"negative rate", edit(func(m map[string]any) { model(m)["prefillTokensPerSecond"] = -5 }), "prefillTokensPerSecond is -5"},
		{"error rate > 1", edit(func(m map[string]any) { model(m)["errorRate"] = 1.5 }), "errorRate is 1.5"},
		{"headroom > 1", edit(func(m map[string]any) { model(m)["kvHeadroom"] = 2 }), "kvHeadroom is 2"},
		{"digest size", edit(func(m map[string]any) { model(m)["digest"].(map[string]any)["bits"] = "AAAA" }), "bits is 3 bytes"},
		{"digest base64", edit(func(m map[string]any) { model(m)["digest"].(map[string]any)["bits"] = "!!" }), "illegal base64"},
		{"digest hashes", edit(func(m map[string]any) { model(m)["digest"].(map[string]any)["hashes"] = 0 }), "hashes is 0"},
		{"digest block", edit(func(m map[string]any) { model(m)["digest"].(map[string]any)["blockTokens"] = 0 }), "blockTokens is 0"},
		{"too large", `{"cluster":"` + strings.Repeat("x", MaxDocumentBytes) + `"}`, "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted %.80q", tc.doc)
			}
			if !strings.HasPrefix(err.Error(), "global summary: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	s := validSummary()
	s.Models[0].ErrorRate = 2
	if _, err := Encode(s); err == nil || !strings.Contains(err.Error(), "errorRate") {
		t.Fatalf("encoded an invalid document: %v", err)
	}
}

func TestMerge(t *testing.T) {
	a, b := validSummary(), validSummary()
	b.Models[0].Model = "qwen"
	now := time.Date(2026, 5, 1, 12, 0, 1, 0, time.UTC)
	m, err := Merge("use1", "us-east-1", now, 3, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Models) != 2 || m.Find("qwen") == nil || m.Find("llama") == nil || m.Find("x") != nil {
		t.Fatalf("merged %+v", m.Models)
	}
	if _, err := Merge("use1", "", now, 3, a, a); err == nil || !strings.Contains(err.Error(), "two pickers") {
		t.Fatalf("merged a model twice: %v", err)
	}
}

// FuzzDecode: no input makes Decode panic, and whatever it accepts encodes and
// decodes back to the same document.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(validSummary())
	f.Add(good)
	f.Add([]byte(`{"version":1,"cluster":"c","generatedAt":"2026-01-01T00:00:00Z","sequence":0,"models":[]}`))
	f.Add([]byte(`{"version":1,"models":[{"model":"m","digest":{"blockTokens":1,"hashes":1,"blocks":0,"bits":"AAAAAAAAAAA="}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(s)
		if err != nil {
			t.Fatalf("accepted a document it cannot encode: %v", err)
		}
		s2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded document rejected: %v", err)
		}
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(s2)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the document:\n%s\n%s", a, b)
		}
	})
}
