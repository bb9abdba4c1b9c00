package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// apiError is an error in vLLM's shape: {"error": {"message", "type", "param",
// "code"}} with the HTTP status repeated as the integer code.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "BadRequestError", Param: param, Message: fmt.Sprintf(format, args...)}
}

func internalError(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: err.Error()}
}

func modelNotFound(model string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Param: "model",
		Message: fmt.Sprintf("The model `%s` does not exist.", model)}
}

func (e *apiError) write(w http.ResponseWriter) {
	var param *string
	if e.Param != "" {
		param = &e.Param
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.Message, "type": e.Type, "param": param, "code": e.Status,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// streamOptions is OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// samplingFields are the request fields that decide the output; the others
// (temperature, top_p, ...) are accepted and ignored.
type samplingFields struct {
	Model               string         `json:"model"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	MinTokens           int            `json:"min_tokens"`
	N                   *int           `json:"n"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	// IgnoreEOS (vLLM) generates until the length limit; the benchmark sets it
	// with max_tokens to fix the output length.
	IgnoreEOS bool `json:"ignore_eos"`
}

// promptRequest is a parsed completion, chat or Responses request: its
// sampling fields, and its prompt, read on demand (after the model is known).
type promptRequest interface {
	sampling() *samplingFields
	promptTokens() ([]uint32, error)
}

func (f *samplingFields) sampling() *samplingFields { return f }

type completionRequest struct {
	samplingFields
	Prompt json.RawMessage `json:"prompt"`
}

type chatRequest struct {
	samplingFields
	Messages []chatMessage `json:"messages"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// generation is a parsed request, ready for the engine.
type generation struct {
	chat            bool
	responses       bool   // answered in the Responses API's shapes
	model           string // as the client named it
	adapter         string
	prompt          []uint32
	output          int
	endsWithStop    bool
	stream          bool
	includeUsage    bool
	continuousUsage bool
}

// defaultCompletionTokens is OpenAI's and vLLM's max_tokens default for /v1/completions.
const defaultCompletionTokens = 16

// parseCompletion reads a /v1/completions body.
func parseCompletion(body []byte) (*completionRequest, error) {
	var req completionRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req.Prompt) == 0 || string(req.Prompt) == "null" {
		return nil, badRequest("prompt", "the prompt is missing")
	}
	return &req, nil
}

// promptTokens reads prompt: a string, an array of token IDs, or a one-element
// array of either (batches of several prompts are not simulated).
func (req *completionRequest) promptTokens() ([]uint32, error) {
	raw := bytes.TrimSpace(req.Prompt)
	if ids, ok := parseTokenIDs(raw); ok {
		return ids, nil // the benchmark's long prompts: skip reflection
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return tokenizer.Tokenize(text), nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return tokenizer.Tokenize(texts[0]), nil
	}
	var idLists [][]uint32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) == 1 {
		return idLists[0], nil
	}
	if len(texts) > 1 || len(idLists) > 1 {
		return nil, badRequest("prompt", "batched prompts are not supported by the simulator; send one prompt per request")
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of token IDs, or a one-element array of either")
}

// parseTokenIDs reads a JSON array of unsigned 32-bit integers written plainly
// (digits, commas, whitespace); anything else is left to encoding/json.
func parseTokenIDs(raw []byte) ([]uint32, bool) {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	ids := make([]uint32, 0, len(raw)/6)
	var v uint64
	digits := 0
	body := raw[1:]
	for i, c := range body {
		if c == ']' && i != len(body)-1 {
			return nil, false
		}
		switch {
		case c >= '0' && c <= '9':
			if digits > 0 && v == 0 {
				return nil, false // a leading zero is not JSON
			}
			v = v*10 + uint64(c-'0')
			digits++
			if v > math.MaxUint32 {
				return nil, false
			}
		case c == ',' || c == ']':
			if digits == 0 {
				if c == ']' && len(ids) == 0 {
					return ids, true // []
				}
				return nil, false
			}
			ids = append(ids, uint32(v))
			v, digits = 0, 0
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			if digits > 0 {
				return nil, false // keep it simple: no space inside or after a number
			}
		default:
			return nil, false
		}
	}
	return ids, true
}

// parseChat reads a /v1/chat/completions body.
func parseChat(body []byte) (*chatRequest, error) {
	var req chatRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	return &req, nil
}

// promptTokens tokenizes the rendered conversation.
func (req *chatRequest) promptTokens() ([]uint32, error) {
	text, err := req.promptText()
	if err != nil {
		return nil, err
	}
	return tokenizer.Tokenize(text), nil
}

// promptText renders the conversation with the simulated chat template.
func (req *chatRequest) promptText() (string, error) {
	msgs := make([]tokenizer.Message, len(req.Messages))
	for i, m := range req.Messages {
		if m.Role == "" {
			return "", badRequest("messages", "message %d has no role", i)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return "", err
		}
		msgs[i] = tokenizer.Message{Role: m.Role, Content: text}
	}
	return tokenizer.RenderChat(msgs), nil
}

// contentText reads message content: a string, null, or an array of text parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest("messages", "message content must be a string or an array of parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		// text is Chat Completions'; input_text and output_text the Responses API's.
		if p.Type != "text" && p.Type != "input_text" && p.Type != "output_text" {
			return "", badRequest("messages", "content part type %q is not supported by the simulator", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

func decodeJSON(body []byte, into any) error {
	if err := json.Unmarshal(body, into); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ):
			field := strings.TrimPrefix(typ.Field, "samplingFields.") // the embedded struct is not the client's concern
			return badRequest(field, "invalid type for field %q: %s", field, typ.Value)
		case errors.As(err, &syntax):
			return badRequest("", "JSON decode error at offset %d: %s", syntax.Offset, syntax.Error())
		default:
			return badRequest("", "JSON decode error: %s", err.Error())
		}
	}
	return nil
}

// outputLength decides how many tokens to generate, as vLLM would: max_tokens
// (or max_completion_tokens) exactly; without it, until the context is full with
// ignore_eos, else a deterministic "natural" length ending at a stop token
// (chat) or the completions default of 16.
func (f *samplingFields) outputLength(prompt []uint32, maxModelLen int, chat bool) (n int, endsWithStop bool, err error) {
	room := maxModelLen - len(prompt)
	if room < 1 {
		return 0, false, badRequest("input_tokens",
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
			maxModelLen, len(prompt))
	}
	if f.N != nil && *f.N != 1 {
		return 0, false, badRequest("n", "n=%d is not supported by the simulator; only n=1", *f.N)
	}
	limit := f.MaxTokens
	if chat && f.MaxCompletionTokens != nil {
		limit = f.MaxCompletionTokens
	}
	if f.MinTokens < 0 {
		return 0, false, badRequest("min_tokens", "min_tokens must be non-negative, got %d", f.MinTokens)
	}
	switch {
	case limit != nil:
		if *limit < 1 {
			return 0, false, badRequest("max_tokens", "max_tokens must be at least 1, got %d", *limit)
		}
		if *limit > room {
			return 0, false, badRequest("max_tokens",
				"'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
				*limit, maxModelLen, len(prompt), *limit, maxModelLen, len(prompt))
		}
		if f.MinTokens > *limit {
			return 0, false, badRequest("min_tokens", "min_tokens %d must not exceed max_tokens %d", f.MinTokens, *limit)
		}
		return *limit, false, nil
	case f.IgnoreEOS:
		return room, false, nil
	case chat:
		return min(room, max(naturalLength(prompt), f.MinTokens, 1)), true, nil
	default:
		return min(room, max(defaultCompletionTokens, f.MinTokens)), false, nil
	}
}

// naturalLength is the deterministic reply length of a chat request without a
// limit: 16 to 256 tokens, fixed by the prompt.
func naturalLength(prompt []uint32) int {
	h := tokenizer.ChainHash(0, prompt)
	return 16 + int(h%241)
}
