package requestbody

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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
		{"role after content", `{"model":"m","messages":[{"content":"long text","role":"assistant"},{"role":"user","content":"q","role":"tool"}]}`,
			"m", "assistant\nlong text\ntool\nq\n", false, 0},
		{"repeated keys", `{"model":"m","messages":[{"content":"a","role":"x","content":"bb","role":"y","role":"z"}]}`,
			"m", "z\nbb\n", false, 0},
		{"completion", `{"model":"m","prompt":"once upon","max_completion_tokens":5}`, "m", "once upon", false, 5},
		{"completion list", `{"model":"m","prompt":["a","b"]}`, "m", "a\nb", false, 0},
		{"token ids", `{"model":"m","prompt":[1,2,3]}`, "m", "", false, 0},
		{"embeddings", `{"model":"e","input":["x","y"]}`, "e", "x\ny", false, 0},
		{"responses", `{"model":"r","instructions":"sys","input":[{"role":"user","content":"q"}],"max_output_tokens":9}`, "r", "system\nsys\nuser\nq\n", false, 9},
		{"responses string", `{"model":"r","input":"q","stream":false}`, "r", "q", false, 0},
		{"unicode", `{"model":"m","prompt":"caf\u00e9 \ud83d\ude00 \ud800x"}`, "m", "café 😀 \uFFFDx", false, 0},
		{"escapes", `{"model":"m","prompt":"a\\\"b\\\\\"\n\t\/c"}`, "m", "a\\\"b\\\\\"\n\t/c", false, 0},
		{"escaped key, last model wins", `{"model":"x","mod\u0065l":"m\u00e9","stream":true,"stream":false}`, "mé", "", false, 0},
		{"whitespace", " {\n\"model\" : \"m\" ,\t\"prompt\" : [ \"a\" , 7 , \"b\" ] }\n", "m", "a\nb", false, 0},
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
		"model not string": `{"model":3}`, "empty model": `{"model":""}`, "trailing data": `{"model":"m"} {}`,
		"unterminated string": `{"model":"m\"}`, "bad number": `{"model":"m","max_tokens":01}`, "missing comma": `{"model":"m" "stream":true}`,
		"too deep": `{"model":"m","x":` + strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1) + `}`,
	} {
		_, err := Parse([]byte(body))
		if err == nil || err.Status != 400 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestParserReuseKeepsResultsCorrect: a reused parser gives each body its own
// prompt, shorter after longer included.
func TestParserReuseKeepsResultsCorrect(t *testing.T) {
	var p Parser
	for _, c := range []struct{ body, prompt string }{
		{`{"model":"m","prompt":"a long first prompt"}`, "a long first prompt"},
		{`{"model":"m","prompt":"short"}`, "short"},
		{`{"model":"m","messages":[{"role":"user","content":"x\ny"}]}`, "user\nx\ny\n"},
	} {
		r, err := p.Parse([]byte(c.body))
		if err != nil || r.Prompt != c.prompt {
			t.Fatalf("%s: %q %v", c.body, r.Prompt, err)
		}
	}
}

// requestReference computes what Parse must return for valid JSON, with
// encoding/json: the same rules, written over decoded values.
func requestReference(body []byte) (Request, bool) {
	var top map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if d.Decode(&top) != nil || top == nil {
		return Request{}, false
	}
	model, _ := top["model"].(string)
	if model == "" {
		return Request{}, false
	}
	r := Request{Model: model, Stream: top["stream"] == true}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if n, ok := top[k].(json.Number); ok {
			if f, _ := strconv.ParseFloat(string(n), 64); f > 0 && f < 1e9 {
				r.MaxTokens = int(f)
				break
			}
		}
	}
	var sb strings.Builder
	strs := func(v any) {
		switch v := v.(type) {
		case string:
			sb.WriteString(v)
		case []any:
			var parts []string
			for _, e := range v {
				if s, ok := e.(string); ok {
					parts = append(parts, s)
				}
			}
			sb.WriteString(strings.Join(parts, "\n"))
		}
	}
	msgs := func(list []any) {
		for _, m := range list {
			obj, _ := m.(map[string]any)
			role, _ := obj["role"].(string)
			sb.WriteString(role + "\n")
			switch c := obj["content"].(type) {
			case string:
				sb.WriteString(c)
			case []any:
				for _, part := range c {
					switch p := part.(type) {
					case string:
						sb.WriteString(p)
					case map[string]any:
						if s, ok := p["text"].(string); ok {
							sb.WriteString(s)
						}
					}
				}
			}
			sb.WriteString("\n")
		}
	}
	if list, ok := top["messages"].([]any); ok {
		msgs(list)
	} else if input, ok := top["input"]; ok {
		if s, ok := top["instructions"].(string); ok {
			sb.WriteString("system\n" + s + "\n")
		}
		if list, ok := input.([]any); ok && len(list) > 0 {
			if _, ok := list[0].(map[string]any); ok {
				msgs(list)
			} else {
				strs(input)
			}
		} else {
			strs(input)
		}
	} else {
		strs(top["prompt"])
	}
	r.Prompt = sb.String()
	return r, true
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","prompt":["a",1,"b"],"stream":true,"max_tokens":3.5}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"text":"x"},{"text":"y","text":"z"}]}],"instructions":"s"}`))
	f.Add([]byte(`{"model":"m\u00e9","prompt":"\ud83d\ude00\n\"q\"\\","messages":{"x":1}}`))
	f.Add([]byte(`{"model":"m","messages":[{"content":"c","role":"r"},3,{"role":null}],"input":"i"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Parser
		scanned := p.Scan(body)
		if m, found, err := ExtractModel(body); scanned.Model != m || scanned.Found != found || fmt.Sprint(scanned.Err) != fmt.Sprint(err) {
			t.Fatalf("Scan's model %q %v %v; ExtractModel %q %v %v", scanned.Model, scanned.Found, scanned.Err, m, found, err)
		}
		r, err := Parse(body)
		if r2, err2 := scanned.Request(); r2 != r || (err2 == nil) != (err == nil) {
			t.Fatalf("Scan's request %+v %v; Parse %+v %v", r2, err2, r, err)
		}
		if err != nil && (err.Status != 400 || len(err.JSON()) == 0) {
			t.Fatalf("bad error %+v", err)
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			return // only the error shape is specified
		}
		want, ok := requestReference(body)
		if !ok {
			if err == nil {
				t.Fatalf("accepted %+v; encoding/json finds no model", r)
			}
			return
		}
		if err != nil {
			t.Fatalf("rejected valid body: %v", err)
		}
		if r != want {
			t.Fatalf("got %+v\nwant %+v", r, want)
		}
	})
}
