// Package openaiclients runs the official OpenAI clients, openai-go and the
// openai npm package (test/openai-js/client.mjs under node), against the real
// standalone gateway over real simulator processes, through every call a
// client makes and every error path, and holds both to the same outcomes.
package openaiclients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/igw-dev/igw/internal/proc"
)

// outcome is what one call observed: an error's HTTP status and code, or
// the value and token count the case reads from a success. client.mjs
// prints the same shape.
type outcome struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Value  string `json:"value"`
	Tokens int    `json:"tokens"`
}

// want is what a case must observe with either client; an empty Value means
// any non-empty value, the same for both clients (the simulator's text is
// deterministic).
var want = map[string]outcome{
	"models.list":             {Value: "e5,llama"},
	"models.retrieve":         {Value: "llama model igw"},
	"models.retrieve unknown": {Status: 404, Code: "model_not_found"},
	"chat":                    {Tokens: 8},
	"chat stream with usage":  {Tokens: 8},
	"completions":             {Tokens: 5},
	"responses":               {Tokens: 6},
	"responses stream":        {Tokens: 6},
	"embeddings":              {Value: "2x4096 same=true", Tokens: 1},
	"abort mid-stream":        {Value: "aborted", Tokens: 1},
	"unknown model":           {Status: 404, Code: "model_not_found"},
	"bad body":                {Status: 400},
	"missing model":           {Status: 400, Code: "missing_model"},
	"wrong method":            {Status: 405, Code: "method_not_allowed"},
	"unknown path":            {Status: 404, Code: "unknown_url"},
}

var (
	fleetOnce sync.Once
	fleetURL  string
	fleetErr  error
)

// gateway starts, once for the package, two simulators (llama-3.1-8b served
// as "llama", in real time so a long stream can be aborted midway, and the
// embedding profile e5-mistral-7b as "e5") behind igw-gateway, and returns
// the gateway's /v1 URL.
func gateway(t *testing.T) string {
	t.Helper()
	fleetOnce.Do(func() { fleetURL, fleetErr = startFleet() })
	if fleetErr != nil {
		t.Fatal(fleetErr)
	}
	return fleetURL
}

// procs are stopped by TestMain.
var procs []*proc.Proc

func TestMain(m *testing.M) {
	code := m.Run()
	proc.StopAll(procs)
	os.Exit(code)
}

func startFleet() (string, error) {
	ctx := context.Background()
	sim, err := proc.Build("modelsim")
	if err != nil {
		return "", err
	}
	gw, err := proc.Build("igw-gateway")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "openaiclients")
	if err != nil {
		return "", err
	}
	config := "pools:\n"
	for _, s := range []struct{ name, model string }{{"llama", "llama-3.1-8b"}, {"e5", "e5-mistral-7b"}} {
		p, err := proc.Start(ctx, "modelsim "+s.name, sim, []string{"--host", "127.0.0.1", "--port", "0",
			"--model", s.model, "--served-model-name", s.name}, "/health")
		if err != nil {
			return "", err
		}
		procs = append(procs, p)
		endpoints := filepath.Join(dir, s.name+".yaml")
		if err := os.WriteFile(endpoints, fmt.Appendf(nil, "- {address: 127.0.0.1, port: %d}\n", p.Port), 0o644); err != nil {
			return "", err
		}
		config += fmt.Sprintf("- {name: %s, models: [%s], endpointsFile: %s}\n", s.name, s.name, endpoints)
	}
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return "", err
	}
	p, err := proc.Start(ctx, "igw-gateway", gw, []string{"--port", "0", "--bind-address", "127.0.0.1", "--config", cfg}, "/readyz")
	if err != nil {
		return "", err
	}
	procs = append(procs, p)
	return p.URL + "/v1", nil
}

// check holds got to want; values of cases that leave Value open must be
// non-empty and, across clients, equal.
func check(t *testing.T, client string, got map[string]outcome) {
	t.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		w, g := want[name], got[name]
		value := w.Value
		if value == "" && w.Status == 0 {
			value = g.Value
			if value == "" {
				t.Errorf("%s %s: empty value", client, name)
			}
		}
		if w.Status != 0 {
			value = g.Value
		}
		if g.Status != w.Status || (w.Code != "" && g.Code != w.Code) || g.Value != value || g.Tokens != w.Tokens {
			t.Errorf("%s %s: got %+v, want %+v", client, name, g, w)
		}
	}
}

func TestOpenAIGo(t *testing.T) {
	got := runGo(t, gateway(t))
	check(t, "openai-go", got)
}

func TestOpenAIJS(t *testing.T) {
	dir := os.Getenv("IGW_OPENAI_JS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		cache := os.Getenv("IGW_CACHE_DIR")
		if cache == "" {
			cache = filepath.Join(home, ".cache", "igw")
			if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
				cache = filepath.Join(x, "igw")
			}
		}
		dir = filepath.Join(cache, "openai-js-7.59.0")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Skipf("the openai npm package is not installed in %s: run `make openai-js` (hack/openai-js.sh), which make test does first", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	base := gateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "../openai-js/client.mjs", base, dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var got map[string]outcome
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out, err)
	}
	check(t, "openai (npm)", got)
	// Both clients read the same text.
	goGot := runGo(t, base)
	for name, g := range got {
		if w := want[name]; w.Value == "" && w.Status == 0 && g.Value != goGot[name].Value {
			t.Errorf("%s: openai (npm) read %q, openai-go %q", name, g.Value, goGot[name].Value)
		}
	}
}

// runGo makes every call with openai-go.
func runGo(t *testing.T, base string) map[string]outcome {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithRequestTimeout(time.Minute))
	ctx := context.Background()
	chat := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there")}
	chatParams := openai.ChatCompletionNewParams{Model: "llama", Messages: chat, MaxTokens: openai.Int(8)}
	respParams := responses.ResponseNewParams{Model: "llama", MaxOutputTokens: openai.Int(6),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello there")}}
	cases := map[string]func() (outcome, error){
		"models.list": func() (outcome, error) {
			var ids []string
			iter := c.Models.ListAutoPaging(ctx)
			for iter.Next() {
				ids = append(ids, iter.Current().ID)
			}
			slices.Sort(ids)
			return outcome{Value: strings.Join(ids, ",")}, iter.Err()
		},
		"models.retrieve": func() (outcome, error) {
			m, err := c.Models.Get(ctx, "llama")
			if err != nil {
				return outcome{}, err
			}
			return outcome{Value: fmt.Sprintf("%s %s %s", m.ID, m.Object, m.OwnedBy)}, nil
		},
		"models.retrieve unknown": func() (outcome, error) {
			_, err := c.Models.Get(ctx, "gpt-9")
			return outcome{}, err
		},
		"chat": func() (outcome, error) {
			r, err := c.Chat.Completions.New(ctx, chatParams)
			if err != nil {
				return outcome{}, err
			}
			return outcome{Value: r.Choices[0].Message.Content, Tokens: int(r.Usage.CompletionTokens)}, nil
		},
		"chat stream with usage": func() (outcome, error) {
			p := chatParams
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s := c.Chat.Completions.NewStreaming(ctx, p)
			var o outcome
			for s.Next() {
				ch := s.Current()
				if len(ch.Choices) > 0 {
					o.Value += ch.Choices[0].Delta.Content
				}
				if ch.Usage.CompletionTokens > 0 {
					o.Tokens = int(ch.Usage.CompletionTokens)
				}
			}
			return o, s.Err()
		},
		"completions": func() (outcome, error) {
			r, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "llama", MaxTokens: openai.Int(5),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}})
			if err != nil {
				return outcome{}, err
			}
			return outcome{Value: r.Choices[0].Text, Tokens: int(r.Usage.CompletionTokens)}, nil
		},
		"responses": func() (outcome, error) {
			r, err := c.Responses.New(ctx, respParams)
			if err != nil {
				return outcome{}, err
			}
			return outcome{Value: r.OutputText(), Tokens: int(r.Usage.OutputTokens)}, nil
		},
		"responses stream": func() (outcome, error) {
			s := c.Responses.NewStreaming(ctx, respParams)
			var o outcome
			for s.Next() {
				ev := s.Current()
				switch ev.Type {
				case "response.output_text.delta":
					o.Value += ev.Delta
				case "response.completed", "response.incomplete":
					o.Tokens = int(ev.Response.Usage.OutputTokens)
				}
			}
			return o, s.Err()
		},
		"embeddings": func() (outcome, error) {
			b64, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "e5", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"query: hello", "query: world"}}})
			if err != nil {
				return outcome{}, err
			}
			flt, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "e5", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
				Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("query: hello")}})
			if err != nil {
				return outcome{}, err
			}
			same := len(b64.Data[0].Embedding) == len(flt.Data[0].Embedding)
			for i, x := range flt.Data[0].Embedding {
				same = same && math.Abs(x-b64.Data[0].Embedding[i]) < 1e-6
			}
			o := outcome{Value: fmt.Sprintf("%dx%d same=%v", len(b64.Data), len(b64.Data[0].Embedding), same)}
			if b64.Usage.PromptTokens > 0 {
				o.Tokens = 1
			}
			return o, nil
		},
		"abort mid-stream": func() (outcome, error) {
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			p := chatParams
			p.MaxTokens = openai.Int(2000)
			s := c.Chat.Completions.NewStreaming(actx, p)
			chunks := 0
			for s.Next() {
				if chunks++; chunks == 3 {
					cancel()
				}
			}
			if errors.Is(s.Err(), context.Canceled) && chunks < 100 {
				o := outcome{Value: "aborted"}
				if chunks >= 3 {
					o.Tokens = 1
				}
				return o, nil
			}
			return outcome{Value: fmt.Sprintf("not aborted after %d chunks", chunks)}, s.Err()
		},
		"unknown model": func() (outcome, error) {
			p := chatParams
			p.Model = "gpt-9"
			_, err := c.Chat.Completions.New(ctx, p)
			return outcome{}, err
		},
		"bad body": func() (outcome, error) {
			_, err := c.Chat.Completions.New(ctx, chatParams, option.WithJSONSet("messages", "hello"))
			return outcome{}, err
		},
		"missing model": func() (outcome, error) {
			_, err := c.Chat.Completions.New(ctx, chatParams, option.WithJSONDel("model"))
			return outcome{}, err
		},
		"wrong method": func() (outcome, error) {
			return outcome{}, c.Get(ctx, "chat/completions", nil, nil)
		},
		"unknown path": func() (outcome, error) {
			return outcome{}, c.Post(ctx, "nothing", map[string]any{}, nil)
		},
	}
	got := map[string]outcome{}
	for name, run := range cases {
		o, err := run()
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr):
			o = outcome{Status: apiErr.StatusCode, Code: apiErr.Code}
		case err != nil:
			o = outcome{Status: -1, Value: err.Error()}
		case o.Status == 0 && want[name].Status != 0:
			o.Value = "no error"
		}
		got[name] = o
	}
	return got
}
