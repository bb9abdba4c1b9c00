// Package requestbody reads what the picker needs from an OpenAI request body
// (chat completions, completions, responses, embeddings): the model, whether
// the response streams, and the prompt text flattened into one string whose
// prefix is stable across turns of a conversation, for prefix affinity.
//
// It scans the JSON once without decoding it into structures (gjson), so a
// 4 MiB prompt costs one pass and one copy of the text.
package requestbody

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/igw-dev/igw/pkg/apierror"
)

// Request is the part of a body the picker uses.
type Request struct {
	Model  string
	Stream bool
	// Prompt is the text the server prefills: chat messages as "role\ncontent\n"
	// in order, or the prompt/input strings joined by newlines.
	Prompt string
	// MaxTokens is max_tokens / max_completion_tokens / max_output_tokens (0 if absent).
	MaxTokens int
}

// Parse reads body. A body that is not a JSON object, or has no string model,
// is a 400 in the OpenAI error shape.
func Parse(body []byte) (Request, *apierror.Error) {
	if len(body) == 0 {
		return Request{}, apierror.BadRequest("missing_body", "The request has no body; send an OpenAI JSON request.")
	}
	// No full validation pass: it would cost as much as the parse on a long
	// prompt, the body-based router in front already rejects malformed JSON,
	// and the model server is the authority on the rest. What cannot be read
	// as an object naming a model is still refused here.
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Request{}, apierror.BadRequest("invalid_json", "The request body must be a JSON object.")
	}
	// One pass over the top-level keys: a Get per field would rescan a
	// multi-megabyte prompt for every absent key.
	var model, stream, messages, input, instructions, prompt gjson.Result
	maxTokens := map[string]gjson.Result{}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			model = v
		case "stream":
			stream = v
		case "messages":
			messages = v
		case "input":
			input = v
		case "instructions":
			instructions = v
		case "prompt":
			prompt = v
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			maxTokens[k.Str] = v
		}
		return true
	})
	var r Request
	if model.Type != gjson.String || model.Str == "" {
		e := apierror.BadRequest("missing_model", "The request body must name a model in the `model` field.")
		e.Param = "model"
		return Request{}, e
	}
	r.Model = model.Str
	r.Stream = stream.Type == gjson.True
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if v := maxTokens[k]; v.Type == gjson.Number && v.Num > 0 && v.Num < 1e9 {
			r.MaxTokens = int(v.Num)
			break
		}
	}
	var sb strings.Builder
	sb.Grow(len(body))
	switch {
	case messages.IsArray():
		writeMessages(&sb, messages)
	case input.Exists():
		// Responses API: a string, or a list of messages / content items;
		// embeddings: a string or a list of strings.
		if instructions.Type == gjson.String {
			sb.WriteString("system\n")
			sb.WriteString(instructions.Str)
			sb.WriteByte('\n')
		}
		if input.IsArray() && input.Get("0").IsObject() {
			writeMessages(&sb, input)
		} else {
			writeStrings(&sb, input)
		}
	default:
		writeStrings(&sb, prompt)
	}
	r.Prompt = sb.String()
	return r, nil
}

func writeMessages(sb *strings.Builder, msgs gjson.Result) {
	msgs.ForEach(func(_, m gjson.Result) bool {
		var role, content gjson.Result
		m.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "role":
				role = v
			case "content":
				content = v
			}
			return true
		})
		sb.WriteString(role.String())
		sb.WriteByte('\n')
		writeContent(sb, content)
		sb.WriteByte('\n')
		return true
	})
}

// writeContent writes a message's content: a string, or parts whose text
// (field "text") is written in order; other parts (images, audio) are skipped.
func writeContent(sb *strings.Builder, c gjson.Result) {
	switch {
	case c.Type == gjson.String:
		sb.WriteString(c.Str)
	case c.IsArray():
		c.ForEach(func(_, part gjson.Result) bool {
			if part.Type == gjson.String {
				sb.WriteString(part.Str)
			} else if t := part.Get("text"); t.Type == gjson.String {
				sb.WriteString(t.Str)
			}
			return true
		})
	}
}

func writeStrings(sb *strings.Builder, v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		sb.WriteString(v.Str)
	case v.IsArray():
		first := true
		v.ForEach(func(_, s gjson.Result) bool {
			if s.Type == gjson.String {
				if !first {
					sb.WriteByte('\n')
				}
				sb.WriteString(s.Str)
				first = false
			}
			return true
		})
	}
}
