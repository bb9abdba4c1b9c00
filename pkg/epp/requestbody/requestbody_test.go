package requestbody

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseShapes(t *testing.T) {
	for _, c := range []struct {
		name, body, model, prompt string
		stream                    bool
		maxTokens                 int
	}{
		{"chat", `{"model":"llama","stream":true,"max_tokens":64,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \"there\"\n"}]}`,
			"llama", "system\nBe brief.\nuser\nHi \"there\"\n\n", true, 64},
		{"chat parts", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}]}`,
			"m", "user\nab\n", false, 0},
		{"completion", `{"model":"m","prompt":"once upon","max_completion_tokens":5}`, "m", "once upon", false, 5},
		{"completion list", `{"model":"m","prompt":["a","b"]}`, "m", "a\nb", false, 0},
		{"embeddings", `{"model":"e","input":["x","y"]}`, "e", "x\ny", false, 0},
		{"responses", `{"model":"r","instructions":"sys","input":[{"role":"user","content":"q"}],"max_output_tokens":9}`, "r", "system\nsys\nuser\nq\n", false, 9},
		{"responses string", `{"model":"r","input":"q","stream":false}`, "r", "q", false, 0},
		{"unicode", `{"model":"m","prompt":"caf\u00e9 \ud83d\ude00"}`, "m", "café 😀", false, 0},
	} {
		r, err := Parse([]byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if r.Model != c.model || r.Prompt != c.prompt || r.Stream != c.stream || r.MaxTokens != c.maxTokens {
			t.Errorf("%s: got %+v", c.name, r)
		}
	}
}

func TestConversationPrefixIsStable(t *testing.T) {
	turn1, _ := Parse([]byte(`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"one"}]}`))
	turn2, _ := Parse([]byte(`{"messages":[{"content":"S","role":"system"},{"role":"user","content":"one"},{"role":"assistant","content":"r"},{"role":"user","content":"two"}],"model":"m"}`))
	if !strings.HasPrefix(turn2.Prompt, turn1.Prompt) {
		t.Fatalf("turn 2 %q does not extend turn 1 %q", turn2.Prompt, turn1.Prompt)
	}
}

func TestParseErrors(t *testing.T) {
	for name, body := range map[string]string{
		"empty": "", "not json": "{model:", "truncated": `{"messages":`, "array": `[1]`, "no model": `{"prompt":"x"}`,
		"model not string": `{"model":3}`, "empty model": `{"model":""}`,
	} {
		_, err := Parse([]byte(body))
		if err == nil || err.Status != 400 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","prompt":["a",1,"b"],"stream":true}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"text":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if err != nil {
			if err.Status != 400 || len(err.JSON()) == 0 {
				t.Fatalf("bad error %+v", err)
			}
			return
		}
		// Valid JSON must agree with encoding/json on the model.
		var v struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &v) == nil && v.Model != r.Model {
			t.Fatalf("model %q, encoding/json says %q", r.Model, v.Model)
		}
		if r.Model == "" || r.MaxTokens < 0 {
			t.Fatalf("accepted %+v", r)
		}
	})
}
