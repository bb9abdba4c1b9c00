package sim

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzRequest holds a request parser to this: every body is either refused
// with a client error (by the parser, or when its prompt is read) or yields a
// usable generation length.
func fuzzRequest[R promptRequest](f *testing.F, chat bool, seeds []string, parse func(body []byte) (R, error)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parse([]byte(body))
		var prompt []uint32
		if err == nil {
			prompt, err = req.promptTokens()
		}
		if err != nil {
			requireClientError(t, err)
			return
		}
		checkOutputLength(t, req.sampling(), prompt, chat)
	})
}

func FuzzCompletionRequest(f *testing.F) {
	fuzzRequest(f, false, []string{`{"prompt":"hi","max_tokens":3}`, `{"prompt":[1,2,3]}`, `{"prompt":["a"]}`,
		`{"prompt":[[5,6]],"ignore_eos":true,"min_tokens":2}`, `{"prompt":["a","b"]}`, `{"prompt":null}`, `{`, `[]`,
		`{"prompt":"x","max_tokens":-1}`, `{"prompt":"x","n":1,"stream":true,"stream_options":{"include_usage":true}}`}, parseCompletion)
}

func FuzzChatRequest(f *testing.F) {
	fuzzRequest(f, true, []string{`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"max_completion_tokens":2}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, `{"messages":[{"content":"x"}]}`,
		`{"messages":[{"role":"system","content":null}],"max_tokens":1}`, `{"messages":"hi"}`}, parseChat)
}

func checkOutputLength(t *testing.T, f *samplingFields, prompt []uint32, chat bool) {
	t.Helper()
	const maxModelLen = 4096
	n, _, err := f.outputLength(prompt, maxModelLen, chat)
	if err != nil {
		requireClientError(t, err)
		return
	}
	if n < 1 || len(prompt)+n > maxModelLen {
		t.Fatalf("output length %d for a %d-token prompt", n, len(prompt))
	}
}

func requireClientError(t *testing.T, err error) {
	t.Helper()
	var aerr *apiError
	if !errors.As(err, &aerr) || aerr.Status != 400 || aerr.Message == "" {
		t.Fatalf("not a 400 API error: %#v", err)
	}
}

func FuzzLoRAModules(f *testing.F) {
	for _, s := range []string{"a=/x", "a=/x b=/y", "a=/x,b=/y", `{"name":"a","path":"/x","base_model_name":"m"}`,
		`[{"name":"a","path":"/x"},{"name":"b","path":"/y"}]`, "a", "=x", "a=/x a=/y", `{"name":"a"}`, `{"nom":"a"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mods, err := ParseLoRAModules(v)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range mods {
			if m.Name == "" || m.Path == "" || seen[m.Name] || strings.ContainsAny(m.Name, ",\"\n") {
				t.Fatalf("accepted bad module %+v from %q", m, v)
			}
			seen[m.Name] = true
		}
		var flagValue LoRAModules
		if err := flagValue.Set(v); err != nil || len(flagValue) != len(mods) {
			t.Fatalf("flag Set(%q) = %v with %d modules, parser gave %d", v, err, len(flagValue), len(mods))
		}
	})
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, "back\\slash", "new\nline", "\x00\x1f", "héllo", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q rendered invalid JSON: %v", s, err)
		}
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got != wantS {
			t.Fatalf("%q decoded to %q, encoding/json gives %q", s, got, wantS)
		}
	})
}

func FuzzKVCacheTokens(f *testing.F) {
	for _, s := range []string{"auto", "AUTO", "", "4096", "0", "-1", "1e6", " 512 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseKVCacheTokens(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseKVCacheTokens(%q) = %d", s, n)
		}
	})
}

func TestOptionsFlags(t *testing.T) {
	opts := DefaultOptions()
	fs := flag.NewFlagSet("modelsim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	err := fs.Parse([]string{"--port", "0", "--gpu", "A100", "--model", "qwen3-32b", "--tensor-parallel", "2",
		"--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--kv-cache-tokens", "100000", "--max-loras", "4",
		"--lora-load-time", "200ms", "--speed-jitter", "0.05", "--seed", "7", "--speedup", "10", "--engine", "sglang",
		"--served-model-name", "qwen,qwen3", "--lora-modules", "a=/a b=/b", "--lora-modules", `{"name":"c","path":"/c"}`})
	if err != nil {
		t.Fatal(err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, _ := opts.EngineConfig()
	want := Config{GPU: "A100", Model: "qwen3-32b", TensorParallel: 2, MaxNumSeqs: 64, MaxNumBatchedTokens: 2048,
		KVCacheTokens: 100000, MaxLoras: 4, LoRALoadTime: 200 * time.Millisecond, SpeedJitter: 0.05, Seed: 7}
	if cfg != want {
		t.Errorf("engine config %+v, want %+v", cfg, want)
	}
	if len(opts.LoRAModules) != 3 || opts.servedNames()[1] != "qwen3" || opts.Speedup != 10 {
		t.Errorf("options %+v", opts)
	}
	for _, bad := range [][]string{{"--speedup", "0"}, {"--engine", "trt"}, {"--gpu", "V100"}, {"--kv-cache-tokens", "lots"},
		{"--lora-modules", "a=/a"}, {"--model", "llama-3.1-70b"}, {"--max-num-seqs", "0"}, {"--speed-jitter", "1.5"}} {
		o := DefaultOptions()
		fs := flag.NewFlagSet("modelsim", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.AddFlags(fs)
		if err := fs.Parse(bad); err == nil && o.Validate() == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func FuzzParseTokenIDs(f *testing.F) {
	for _, s := range []string{"[]", "[1,2,3]", "[0]", "[01]", "[1,]", "[,1]", "[1]2]", "[4294967295]", "[4294967296]",
		"[ 1,2]", "[1 ,2]", "[-1]", "[1.5]", `["a"]`, "[[1]]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, ok := parseTokenIDs([]byte(s))
		if !ok {
			return
		}
		var want []uint32
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json rejects it: %v", s, err)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%q: fast path %v, encoding/json %v", s, ids, want)
		}
	})
}

func FuzzResponsesRequest(f *testing.F) {
	fuzzRequest(f, true, []string{`{"input":"hi","max_output_tokens":3}`, `{"input":"hi","instructions":"Be brief."}`,
		`{"input":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"output_text","text":"b"}]}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`, `{"input":[]}`, `{"input":null}`, `{"input":3}`, `{`}, parseResponses)
}

// FuzzEmbeddingInputs: every input is refused with a client error or read as
// at least one list of tokens.
func FuzzEmbeddingInputs(f *testing.F) {
	for _, s := range []string{`"hi"`, `["a","b"]`, `[1,2,3]`, `[[1],[2,3]]`, `[]`, `[[]]`, `{}`, `null`, `""`, `[1,"a"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		req := embeddingRequest{Input: json.RawMessage(input)}
		inputs, err := req.inputs()
		if err != nil {
			requireClientError(t, err)
			return
		}
		if len(inputs) == 0 {
			t.Fatalf("%q: no inputs and no error", input)
		}
	})
}
