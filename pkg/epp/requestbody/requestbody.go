// Package requestbody reads what the picker needs from an OpenAI request body
// (chat completions, completions, responses, embeddings): the model, whether
// the response streams, and the prompt text flattened into one string whose
// prefix is stable across turns of a conversation, for prefix affinity.
//
// It scans the JSON without decoding it into structures (gjson), so a 4 MiB
// prompt costs one validation pass and one copy of the text.
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
	if !gjson.ValidBytes(body) {
		return Request{}, apierror.BadRequest("invalid_json", "The request body is not valid JSON.")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Request{}, apierror.BadRequest("invalid_json", "The request body must be a JSON object.")
	}
	var r Request
	fields := root
	model := fields.Get("model")
	if model.Type != gjson.String || model.Str == "" {
		e := apierror.BadRequest("missing_model", "The request body must name a model in the `model` field.")
		e.Param = "model"
		return Request{}, e
	}
	r.Model = model.Str
	r.Stream = fields.Get("stream").Type == gjson.True
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if v := fields.Get(k); v.Type == gjson.Number && v.Num > 0 && v.Num < 1e9 {
			r.MaxTokens = int(v.Num)
			break
		}
	}
	var sb strings.Builder
	sb.Grow(len(body))
	if msgs := fields.Get("messages"); msgs.IsArray() {
		writeMessages(&sb, msgs)
	} else if in := fields.Get("input"); in.Exists() {
		// Responses API: a string, or a list of messages / content items;
		// embeddings: a string or a list of strings.
		if in.IsArray() && in.Get("0").IsObject() {
			writeMessages(&sb, in)
		} else {
			writeStrings(&sb, in)
		}
		if instr := fields.Get("instructions"); instr.Type == gjson.String {
			r.Prompt = "system\n" + instr.Str + "\n" + sb.String()
			return r, nil
		}
	} else {
		writeStrings(&sb, fields.Get("prompt"))
	}
	r.Prompt = sb.String()
	return r, nil
}

func writeMessages(sb *strings.Builder, msgs gjson.Result) {
	msgs.ForEach(func(_, m gjson.Result) bool {
		sb.WriteString(m.Get("role").String())
		sb.WriteByte('\n')
		writeContent(sb, m.Get("content"))
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
