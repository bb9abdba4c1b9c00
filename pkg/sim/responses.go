package sim

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// responsesRequest is the part of an OpenAI Responses API request
// (POST /v1/responses) the simulator acts on.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    string          `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
}

// parseResponses reads a /v1/responses body as the chat request it amounts
// to: instructions as a system message, then the input, a string (one user
// message) or a list of messages whose content is a string or input/output
// text parts.
func parseResponses(body []byte) (*chatRequest, error) {
	var req responsesRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	chat := &chatRequest{samplingFields: samplingFields{Model: req.Model, MaxTokens: req.MaxOutputTokens, Stream: req.Stream}}
	if req.Instructions != "" {
		content, _ := json.Marshal(req.Instructions)
		chat.Messages = append(chat.Messages, chatMessage{Role: "system", Content: content})
	}
	var text string
	var items []chatMessage
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
		return nil, badRequest("input", "input is missing")
	case json.Unmarshal(req.Input, &text) == nil:
		chat.Messages = append(chat.Messages, chatMessage{Role: "user", Content: req.Input})
	case json.Unmarshal(req.Input, &items) == nil && len(items) > 0:
		chat.Messages = append(chat.Messages, items...)
	default:
		return nil, badRequest("input", "input must be a string or a non-empty list of messages")
	}
	return chat, nil
}

// responsesRenderer renders one request's answer as a Responses API response
// object, or streamed as its server-sent events: response.created,
// response.in_progress, the output item and content part added, one
// response.output_text.delta per batch of tokens, the text, part and item
// done, and response.completed (response.incomplete when max_output_tokens
// cut it) with the usage.
type responsesRenderer struct {
	gen     *generation
	id      string
	itemID  string
	created int64
	seq     int
	buf     []byte
}

func newResponsesRenderer(gen *generation, id uint64) *responsesRenderer {
	hex := strconv.FormatUint(id, 16)
	return &responsesRenderer{gen: gen, id: "resp_" + hex, itemID: "msg_" + hex, created: time.Now().Unix()}
}

type responseObject struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Model             string             `json:"model"`
	Output            []responseItem     `json:"output"`
	Usage             *responseUsage     `json:"usage"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Error             *struct{}          `json:"error"`
	MaxOutputTokens   *int               `json:"max_output_tokens"`
	Text              map[string]any     `json:"text"`
	Tools             []any              `json:"tools"`
	Metadata          map[string]string  `json:"metadata"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	ToolChoice        string             `json:"tool_choice"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseItem struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
}

type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func (r *responsesRenderer) part(text string) responsePart {
	return responsePart{Type: "output_text", Text: text, Annotations: []any{}}
}

func (r *responsesRenderer) item(status string, parts ...responsePart) responseItem {
	return responseItem{Type: "message", ID: r.itemID, Status: status, Role: "assistant", Content: append([]responsePart{}, parts...)}
}

// object is the response; fin, at the end, completes it with the output and usage.
func (r *responsesRenderer) object(fin *Event) responseObject {
	o := responseObject{ID: r.id, Object: "response", CreatedAt: r.created, Status: "in_progress", Model: r.gen.model,
		Output: []responseItem{}, Text: map[string]any{"format": map[string]string{"type": "text"}}, Tools: []any{},
		Metadata: map[string]string{}, ParallelToolCalls: true, ToolChoice: "auto"}
	if fin == nil {
		return o
	}
	o.Status = "completed"
	if !r.gen.endsWithStop {
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	o.Output = []responseItem{r.item("completed", r.part(tokenizer.OutputText(0, fin.Tokens)))}
	u := &responseUsage{InputTokens: len(r.gen.prompt), OutputTokens: fin.Tokens, TotalTokens: len(r.gen.prompt) + fin.Tokens}
	u.InputTokensDetails.CachedTokens = fin.CachedTokens
	o.Usage = u
	return o
}

func (r *responsesRenderer) whole(fin Event) []byte {
	b, _ := json.Marshal(r.object(&fin)) // cannot fail: plain structs
	return b
}

// event appends one server-sent event: its type as the SSE event name and in
// the data, with the stream's sequence number.
func (r *responsesRenderer) event(b []byte, typ string, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	data, _ := json.Marshal(fields) // cannot fail: plain values
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

func (r *responsesRenderer) chunk(from, to int, done bool, fin Event) []byte {
	b := r.buf[:0]
	at := map[string]any{"item_id": r.itemID, "output_index": 0, "content_index": 0}
	with := func(k string, v any) map[string]any {
		m := map[string]any{k: v}
		for key, val := range at {
			m[key] = val
		}
		return m
	}
	if from == 0 && r.seq == 0 {
		b = r.event(b, "response.created", map[string]any{"response": r.object(nil)})
		b = r.event(b, "response.in_progress", map[string]any{"response": r.object(nil)})
		b = r.event(b, "response.output_item.added", map[string]any{"output_index": 0, "item": r.item("in_progress")})
		b = r.event(b, "response.content_part.added", with("part", r.part("")))
	}
	if to > from {
		b = r.event(b, "response.output_text.delta", with("delta", tokenizer.OutputText(from, to-from)))
	}
	if done {
		text := tokenizer.OutputText(0, fin.Tokens)
		b = r.event(b, "response.output_text.done", with("text", text))
		b = r.event(b, "response.content_part.done", with("part", r.part(text)))
		b = r.event(b, "response.output_item.done", map[string]any{"output_index": 0, "item": r.item("completed", r.part(text))})
		final := r.object(&fin)
		b = r.event(b, "response."+final.Status, map[string]any{"response": final})
	}
	r.buf = b
	return b
}
