package sim

import (
	"encoding/json"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// PromptTokenizer tokenizes a request's prompt exactly as the simulator's
// server does (chat messages rendered with the simulated template, completion
// prompts as text or token IDs), so that a router hashing its tokens finds
// the blocks the simulator reports in its KV events. It has the method set of
// the endpoint picker's tokenizer interface (kvevents.Tokenizer) without
// importing it: the picker never imports the simulator, the benchmark and the
// tests plug this in.
type PromptTokenizer struct{}

// AppendPromptTokens appends the prompt's token IDs to dst: from body (an
// OpenAI chat or completions request) when given, else from text.
func (PromptTokenizer) AppendPromptTokens(dst []uint32, body []byte, text string) ([]uint32, error) {
	if len(body) == 0 {
		return tokenizer.AppendTokens(dst, text), nil
	}
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return dst, err
	}
	if len(probe.Messages) > 0 {
		return appendPrompt(dst, body, parseChat)
	}
	return appendPrompt(dst, body, parseCompletion)
}

// appendPrompt appends the prompt of the request body parse reads.
func appendPrompt[R promptRequest](dst []uint32, body []byte, parse func([]byte) (R, error)) ([]uint32, error) {
	req, err := parse(body)
	if err != nil {
		return dst, err
	}
	ids, err := req.promptTokens()
	if err != nil {
		return dst, err
	}
	return append(dst, ids...), nil
}
