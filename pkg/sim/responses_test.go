package sim

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func client(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func TestResponsesThroughOpenAIClient(t *testing.T) {
	_, base := startServer(t, nil)
	c := client(base)
	params := responses.ResponseNewParams{
		Model:           "llama-3.1-8b",
		Instructions:    openai.String("Be brief."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello there")},
		MaxOutputTokens: openai.Int(12),
	}
	resp, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "response" || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" ||
		resp.Usage.OutputTokens != 12 || resp.Usage.InputTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+12 || resp.OutputText() == "" {
		t.Fatalf("response %s", resp.RawJSON())
	}

	stream := c.Responses.NewStreaming(context.Background(), params)
	var types []string
	var deltas strings.Builder
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.incomplete", "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("events %v, want %v", types, want)
	}
	if deltas.String() != resp.OutputText() || final.OutputText() != resp.OutputText() || final.Usage.OutputTokens != 12 {
		t.Errorf("streamed %q, final %s; whole %q", deltas.String(), final.RawJSON(), resp.OutputText())
	}

	// Without a limit the reply ends at a stop token: completed.
	var messages responses.ResponseNewParams
	messages.Model = "llama-3.1-8b"
	messages.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Hello", responses.EasyInputMessageRoleUser)}}
	if resp, err := c.Responses.New(context.Background(), messages); err != nil || resp.Status != "completed" {
		t.Fatalf("%v %s", err, resp.RawJSON())
	}
}

func TestEmbeddings(t *testing.T) {
	_, base := startServer(t, func(o *Options) { o.Model = "e5-mistral-7b" })
	c := client(base)
	ctx := context.Background()
	res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "e5-mistral-7b",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"query: hello", "query: a longer sentence here"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || len(res.Data[0].Embedding) != 4096 || res.Data[1].Index != 1 || res.Usage.PromptTokens == 0 ||
		res.Usage.TotalTokens != res.Usage.PromptTokens {
		t.Fatalf("%d embeddings, usage %+v", len(res.Data), res.Usage)
	}
	var norm float64
	for _, x := range res.Data[0].Embedding {
		norm += x * x
	}
	if math.Abs(norm-1) > 1e-3 {
		t.Errorf("|v|² = %g, want 1", norm)
	}
	// base64: the same vector as little-endian float32s (the client decodes it).
	b64, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "e5-mistral-7b", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("query: hello")}})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(b64.RawJSON()), &raw); err != nil || len(raw.Data) != 1 || len(raw.Data[0].Embedding) != base64.StdEncoding.EncodedLen(4096*4) {
		t.Fatalf("%v: base64 answer %.200s", err, b64.RawJSON())
	}
	vec, err := base64.StdEncoding.DecodeString(raw.Data[0].Embedding)
	if err != nil || math.Float32frombits(binary.LittleEndian.Uint32(vec)) != float32(res.Data[0].Embedding[0]) {
		t.Errorf("base64 vector %v does not start with the float one's %g", err, res.Data[0].Embedding[0])
	}

	// An embedding model does not generate, and a generative one does not embed.
	var apiErr *openai.Error
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "e5-mistral-7b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "embedding model") {
		t.Errorf("chat on an embedding model: %v", err)
	}
	_, genBase := startServer(t, nil)
	generative := client(genBase)
	_, err = generative.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "llama-3.1-8b",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "model" {
		t.Errorf("embeddings on a generative model: %v", err)
	}
	for body, param := range map[string]string{
		`{"model":"e5-mistral-7b","input":"x","encoding_format":"hex"}`: "encoding_format",
		`{"model":"e5-mistral-7b","input":"x","dimensions":8}`:          "dimensions",
		`{"model":"e5-mistral-7b","input":[]}`:                          "input",
		`{"model":"e5-mistral-7b"}`:                                     "input",
	} {
		status, out := post(t, base+"/v1/embeddings", body)
		var e struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(out, &e) != nil || e.Error.Param != param {
			t.Errorf("%s: %d %s, want 400 on %s", body, status, out, param)
		}
	}
}

// TestUnknownPathsAndMethodsAreOpenAIErrors: the mux's own 404 and 405 were
// plain text.
func TestUnknownPathsAndMethodsAreOpenAIErrors(t *testing.T) {
	_, base := startServer(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		typ          string
	}{
		{http.MethodGet, "/v1/chat/completions", http.StatusMethodNotAllowed, "MethodNotAllowedError"},
		{http.MethodPost, "/v1/nothing", http.StatusNotFound, "NotFoundError"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || e.Error.Code != tc.status || e.Error.Message == "" || e.Error.Type != tc.typ {
			t.Errorf("%s %s: %d, %v, %+v", tc.method, tc.path, resp.StatusCode, err, e)
		}
	}
}
