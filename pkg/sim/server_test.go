package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/pkg/tokenizer"
	"github.com/igw-dev/igw/pkg/wire"
)

// startServer runs a server on a loopback port until the test ends.
func startServer(t testing.TB, mutate func(*Options)) (*Server, string) {
	t.Helper()
	opts := DefaultOptions()
	opts.Speedup = 20
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, "http://" + ln.Addr().String()
}

func post(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	a := servetest.Post(t, url, body)
	return a.Status, a.Body
}

// usageJSON is a response's usage as OpenAI clients read it.
type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func TestOpenAIClientStreamsChatWithUsage(t *testing.T) {
	_, base := startServer(t, nil)
	client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "llama-3.1-8b",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello there")},
		MaxTokens:     openai.Int(12),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	var usage openai.CompletionUsage
	var finish string
	for stream.Next() {
		chunk := stream.Current()
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		if chunk.Usage.TotalTokens > 0 {
			usage = chunk.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	wantPrompt := tokenizer.Count(tokenizer.RenderChat([]tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}))
	if usage.CompletionTokens != 12 || usage.PromptTokens != int64(wantPrompt) || usage.TotalTokens != int64(wantPrompt+12) {
		t.Errorf("usage %+v, want 12 completion and %d prompt tokens", usage, wantPrompt)
	}
	if text.String() != tokenizer.OutputText(0, 12) || finish != "length" {
		t.Errorf("text %q finish %q", text.String(), finish)
	}
}

func TestChatAndCompletionShapes(t *testing.T) {
	_, base := startServer(t, func(o *Options) { o.EnablePromptTokensDetails = true })
	code, body := post(t, base+"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":4}`)
	var chat struct {
		Object  string
		Model   string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage usageJSON
	}
	if err := json.Unmarshal(body, &chat); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if chat.Object != "chat.completion" || chat.Model != "llama-3.1-8b" || chat.Choices[0].Message.Role != "assistant" ||
		chat.Choices[0].Message.Content != tokenizer.OutputText(0, 4) || chat.Usage.CompletionTokens != 4 {
		t.Errorf("chat response %s", body)
	}

	// A prompt of token IDs, repeated: the second finds it cached.
	ids := tokenizer.Tokenize(tokenizer.GenerateText(1, 200))
	promptJSON, _ := json.Marshal(ids)
	req := `{"model":"llama-3.1-8b","prompt":` + string(promptJSON) + `,"max_tokens":3,"ignore_eos":true}`
	post(t, base+"/v1/completions", req)
	code, body = post(t, base+"/v1/completions", req)
	var cmpl struct {
		Object  string
		Choices []struct{ Text string }
		Usage   usageJSON
	}
	if err := json.Unmarshal(body, &cmpl); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if cmpl.Object != "text_completion" || cmpl.Usage.PromptTokens != 200 || cmpl.Usage.CompletionTokens != 3 ||
		cmpl.Usage.PromptTokensDetails.CachedTokens != 192 || cmpl.Choices[0].Text != tokenizer.OutputText(0, 3) {
		t.Errorf("completion response %s", body)
	}

	// Without max_tokens a completion is 16 tokens, a chat reply its natural length.
	_, body = post(t, base+"/v1/completions", `{"prompt":"Once upon a time"}`)
	if !strings.Contains(string(body), `"completion_tokens":16`) || !strings.Contains(string(body), `"finish_reason":"length"`) {
		t.Errorf("default completion: %s", body)
	}
	_, body = post(t, base+"/v1/chat/completions", `{"messages":[{"role":"user","content":"tell me"}]}`)
	if !strings.Contains(string(body), `"finish_reason":"stop"`) {
		t.Errorf("natural-length chat: %s", body)
	}
}

func TestStreamingCompletionSSE(t *testing.T) {
	_, base := startServer(t, nil)
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"abc","max_tokens":5,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, line)
		}
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	var text strings.Builder
	for _, ev := range events[:len(events)-2] {
		var c struct {
			Choices []struct{ Text string }
			Usage   struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev, err)
		}
		text.WriteString(c.Choices[0].Text)
		if c.Usage.CompletionTokens == 0 {
			t.Errorf("continuous usage missing in %q", ev)
		}
	}
	if text.String() != tokenizer.OutputText(0, 5) {
		t.Errorf("streamed text %q", text.String())
	}
	if !strings.Contains(events[len(events)-2], `"choices":[],"usage":{"prompt_tokens":1,"total_tokens":6,"completion_tokens":5}`) {
		t.Errorf("usage chunk %q", events[len(events)-2])
	}
}

func TestErrorsHaveVLLMShape(t *testing.T) {
	_, base := startServer(t, func(o *Options) { o.MaxLoras = 1 })
	for _, tc := range []struct {
		path, body string
		status     int
		typ, param string
		message    string
	}{
		{"/v1/completions", `{"model":"gpt-9","prompt":"x"}`, 404, "NotFoundError", "model", "The model `gpt-9` does not exist."},
		{"/v1/chat/completions", `{"model":"sql","messages":[{"role":"user","content":"x"}]}`, 404, "NotFoundError", "model", "The model `sql` does not exist."},
		{"/v1/completions", `{"prompt": "x"`, 400, "BadRequestError", "", ""},
		{"/v1/completions", `{"prompt":"x","max_tokens":"many"}`, 400, "BadRequestError", "max_tokens", ""},
		{"/v1/completions", `{"prompt":"x","max_tokens":200000}`, 400, "BadRequestError", "max_tokens", ""},
		{"/v1/completions", `{"prompt":"x","n":2}`, 400, "BadRequestError", "n", ""},
		{"/v1/chat/completions", `{"messages":[]}`, 400, "BadRequestError", "messages", ""},
		{"/v1/unload_lora_adapter", `{"lora_name":"never"}`, 404, "NotFoundError", "", ""},
		{"/v1/load_lora_adapter", `{"lora_name":"x"}`, 400, "InvalidUserInput", "", ""},
	} {
		code, body := post(t, base+tc.path, tc.body)
		var e struct {
			Error struct {
				Message string
				Type    string
				Param   *string
				Code    int
			}
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s %s: %s", tc.path, tc.body, body)
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if code != tc.status || e.Error.Code != tc.status || e.Error.Type != tc.typ || param != tc.param ||
			(tc.message != "" && e.Error.Message != tc.message) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, code, body)
		}
	}
}

func TestLoRAAdaptersLoadListUnload(t *testing.T) {
	_, base := startServer(t, func(o *Options) {
		o.MaxLoras = 2
		_ = o.LoRAModules.Set("sql=/adapters/sql")
	})
	code, body := post(t, base+"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/adapters/chat"}`)
	if code != 200 || string(body) != "Success: LoRA adapter 'chat' added successfully." {
		t.Fatalf("load: %d %s", code, body)
	}
	if code, _ := post(t, base+"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/adapters/chat"}`); code != 400 {
		t.Errorf("loading twice: %d", code)
	}
	var models struct {
		Object string
		Data   []struct {
			ID     string
			Root   string
			Parent *string
		}
	}
	_ = json.Unmarshal(servetest.Get(t, base+"/v1/models").Body, &models)
	if models.Object != "list" || len(models.Data) != 3 || models.Data[0].ID != "llama-3.1-8b" ||
		models.Data[1].ID != "chat" || *models.Data[1].Parent != "llama-3.1-8b" || models.Data[2].Root != "/adapters/sql" {
		t.Fatalf("models %+v", models)
	}
	if code, body := post(t, base+"/v1/completions", `{"model":"chat","prompt":"x","max_tokens":1}`); code != 200 {
		t.Fatalf("adapter request: %d %s", code, body)
	}
	if code, body := post(t, base+"/v1/unload_lora_adapter", `{"lora_name":"chat"}`); code != 200 || !strings.Contains(string(body), "removed") {
		t.Fatalf("unload: %d %s", code, body)
	}
	if code, _ := post(t, base+"/v1/completions", `{"model":"chat","prompt":"x","max_tokens":1}`); code != 404 {
		t.Errorf("unloaded adapter answered %d", code)
	}
}

func TestMetricsParseAndReportState(t *testing.T) {
	_, base := startServer(t, nil)
	post(t, base+"/v1/completions", `{"prompt":"`+tokenizer.GenerateText(1, 100)+`","max_tokens":4}`)
	fams := servetest.Metrics(t, base+"/metrics")
	for name, want := range map[string]float64{
		wire.VLLMNumRequestsRunning: 0, wire.VLLMNumRequestsWaiting: 0, wire.VLLMKVCacheUsagePerc: 0,
		wire.VLLMPrefixCacheQueries: 100, wire.VLLMPrefixCacheHits: 0, wire.VLLMPromptTokens: 100,
		wire.VLLMGenerationTokens: 4, wire.VLLMTimeToFirstToken: 1, wire.VLLME2ERequestLatency: 1, wire.VLLMInterTokenLatency: 3,
	} {
		if got := servetest.Value(servetest.Series(t, fams, name, nil)); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	info := fams[wire.VLLMCacheConfigInfo].Metric[0]
	if servetest.Label(info, wire.VLLMLabelBlockSize) != "16" || servetest.Label(info, wire.VLLMLabelNumGPUBlocks) != "28181" {
		t.Errorf("cache_config_info labels %v", info.Label)
	}
	if _, ok := fams[wire.VLLMLoRARequestsInfo]; ok {
		t.Error("lora_requests_info exposed with LoRA disabled")
	}
	// TTFT is reported in engine time: the analytic value for 100 tokens on an H100.
	h := fams[wire.VLLMTimeToFirstToken].Metric[0].Histogram
	p := mustProfile(t, "H100", "llama-3.1-8b", 1)
	if want := p.AnalyticTTFT(100, 0, DefaultMaxNumBatchedTokens).Seconds(); h.GetSampleSum() != want {
		t.Errorf("TTFT sum %g, want %g", h.GetSampleSum(), want)
	}
}

func TestSGLangMetricNames(t *testing.T) {
	_, base := startServer(t, func(o *Options) { o.Engine = EngineSGLang })
	post(t, base+"/v1/completions", `{"prompt":"abcdefgh","max_tokens":1}`)
	post(t, base+"/v1/completions", `{"prompt":"abcdefgh","max_tokens":1}`)
	fams := servetest.Metrics(t, base+"/metrics")
	for _, name := range []string{wire.SGLangNumRunningReqs, wire.SGLangNumQueueReqs, wire.SGLangTokenUsage, wire.SGLangCacheHitRate, wire.SGLangTimeToFirstToken} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if fams[wire.VLLMNumRequestsRunning] != nil {
		t.Error("vLLM names exposed with --engine sglang")
	}
}

// Requests that overfill a small KV cache wait and preempt, visibly in /metrics.
func TestFullKVCacheVisibleInMetrics(t *testing.T) {
	_, base := startServer(t, func(o *Options) { o.KVCacheTokens = 3000; o.Speedup = 20 })
	for i := range 8 {
		go func() {
			body := `{"prompt":"` + tokenizer.GenerateText(uint64(i), 400) + `","max_tokens":600,"ignore_eos":true}`
			// The test's context ends these requests when the test is done.
			req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	var waiting, preemptions float64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && (waiting == 0 || preemptions == 0) {
		fams := servetest.Metrics(t, base+"/metrics")
		waiting = max(waiting, servetest.Value(servetest.Series(t, fams, wire.VLLMNumRequestsWaiting, nil)))
		preemptions = servetest.Value(servetest.Series(t, fams, wire.VLLMNumPreemptions, nil))
		if servetest.Value(servetest.Series(t, fams, wire.VLLMKVCacheUsagePerc, nil)) > 1 {
			t.Fatal("KV usage above 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if waiting == 0 || preemptions == 0 {
		t.Fatalf("max waiting %g, preemptions %g: the full cache never showed", waiting, preemptions)
	}
}

func TestLoRARequestsInfo(t *testing.T) {
	_, base := startServer(t, func(o *Options) {
		o.MaxLoras = 1
		o.Speedup = 10
		_ = o.LoRAModules.Set("a=/a b=/b")
	})
	done := make(chan struct{}, 2)
	for _, adapter := range []string{"a", "b"} {
		go func() {
			post(t, base+"/v1/completions", `{"model":"`+adapter+`","prompt":"hello","max_tokens":400}`)
			done <- struct{}{}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	var newest *dto.Metric
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		fams := servetest.Metrics(t, base+"/metrics")
		newest = nil
		for _, m := range fams[wire.VLLMLoRARequestsInfo].Metric {
			if newest == nil || m.Gauge.GetValue() > newest.Gauge.GetValue() {
				newest = m
			}
		}
		if servetest.Label(newest, wire.VLLMLabelRunningLoRAAdapters) != "" && servetest.Label(newest, wire.VLLMLabelWaitingLoRAAdapters) != "" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	running, waiting := servetest.Label(newest, wire.VLLMLabelRunningLoRAAdapters), servetest.Label(newest, wire.VLLMLabelWaitingLoRAAdapters)
	// One slot: one adapter runs, the other waits for it.
	if running == waiting || (running != "a" && running != "b") || (waiting != "a" && waiting != "b") ||
		servetest.Label(newest, wire.VLLMLabelMaxLoRA) != "1" {
		t.Errorf("newest lora_requests_info: running %q waiting %q max_lora %q", running, waiting, servetest.Label(newest, wire.VLLMLabelMaxLoRA))
	}
	if newest.Gauge.GetValue() < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("lora_requests_info value %g is not a recent Unix time", newest.Gauge.GetValue())
	}
	<-done
	<-done
	fams := servetest.Metrics(t, base+"/metrics")
	if servetest.Value(servetest.Series(t, fams, wire.VLLMGenerationTokens, nil)) != 800 {
		t.Errorf("generation tokens %g", servetest.Value(servetest.Series(t, fams, wire.VLLMGenerationTokens, nil)))
	}
}

func TestClientDisconnectAbortsRequest(t *testing.T) {
	srv, base := startServer(t, func(o *Options) { o.Speedup = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions",
		strings.NewReader(`{"prompt":"x","max_tokens":10000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(resp.Body).ReadString('\n')
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var s Snapshot
		srv.rt.snapshot(&s)
		if s.Aborted == 1 && s.Running == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the request kept running after its client went away")
}
