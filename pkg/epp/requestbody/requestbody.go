// Package requestbody reads what the picker needs from an OpenAI request body
// (chat completions, completions, responses, embeddings): the model, whether
// the response streams, the token limit, and the prompt text flattened into
// one string whose prefix is stable across turns of a conversation, for prefix
// affinity.
//
// The body is scanned in place, twice over at most: one syntax pass over the
// whole body that notes where the prompt fields are, then one pass over the
// chosen field that copies its text. No Go structures are built for the JSON,
// and a Parser reuses its prompt buffer between requests.
package requestbody

import (
	"slices"
	"unsafe"

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

// Parser parses bodies, reusing one prompt buffer. The zero value is ready.
// Not safe for concurrent use.
type Parser struct {
	buf []byte
}

// Cap is the capacity of p's buffer.
func (p *Parser) Cap() int { return cap(p.buf) }

// Parse reads body. A body that is not one JSON object, or has no string
// model, is a 400 in the OpenAI error shape. The result's Prompt is owned by
// the caller.
func Parse(body []byte) (Request, *apierror.Error) {
	var p Parser
	return p.Parse(body)
}

// Parse reads body like the package's Parse, but the result's Prompt shares
// p's buffer: it is valid until the next call to p.Parse.
func (p *Parser) Parse(body []byte) (Request, *apierror.Error) {
	if len(body) == 0 {
		return Request{}, apierror.BadRequest("missing_body", "The request has no body; send an OpenAI JSON request.")
	}
	f, ok := scanFields(body)
	if !ok {
		return Request{}, apierror.BadRequest("invalid_json", "The request body must be one JSON object.")
	}
	if f.model == "" {
		e := apierror.BadRequest("missing_model", "The request body must name a model in the `model` field.")
		e.Param = "model"
		return Request{}, e
	}
	r := Request{Model: f.model, Stream: f.stream}
	for _, v := range f.maxTokens {
		if v > 0 && v < 1e9 {
			r.MaxTokens = int(v)
			break
		}
	}
	p.buf = p.flatten(p.buf[:0], body, &f)
	r.Prompt = unsafe.String(unsafe.SliceData(p.buf), len(p.buf))
	return r, nil
}

// span is a value's position in the body; end 0 means absent.
type span struct{ start, end int }

func (s span) exists() bool { return s.end > 0 }

// fields is what the syntax pass found. A repeated key counts from its last
// occurrence, as in encoding/json.
type fields struct {
	model  string
	stream bool
	// maxTokens: max_tokens, max_completion_tokens, max_output_tokens, in order of precedence.
	maxTokens                             [3]float64
	messages, input, instructions, prompt span
	messagesIsArray                       bool
}

var maxTokenKeys = [3]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// scanFields checks body's syntax and notes the fields the picker reads.
func scanFields(body []byte) (fields, bool) {
	var f fields
	s := scanner{b: body}
	if s.peek() != '{' {
		return f, false
	}
	mark := func(sp *span) bool {
		s.ws()
		sp.start = s.i
		ok := s.value()
		sp.end = s.i
		return ok
	}
	ok := s.object(func(key []byte) bool {
		switch {
		case keyIs(key, "model"):
			f.model = ""
			if s.peek() == '"' {
				var ok bool
				f.model, ok = s.text()
				return ok
			}
			return s.value()
		case keyIs(key, "stream"):
			f.stream = s.peek() == 't'
			return s.value()
		case keyIs(key, "messages"):
			f.messagesIsArray = s.peek() == '['
			return mark(&f.messages)
		case keyIs(key, "input"):
			return mark(&f.input)
		case keyIs(key, "instructions"):
			return mark(&f.instructions)
		case keyIs(key, "prompt"):
			return mark(&f.prompt)
		}
		for i, k := range maxTokenKeys {
			if keyIs(key, k) {
				f.maxTokens[i] = 0
				if c := s.peek(); c == '-' || '0' <= c && c <= '9' {
					var ok bool
					f.maxTokens[i], ok = s.float()
					return ok
				}
				return s.value()
			}
		}
		return s.value()
	})
	if !ok || s.peek() != 0 {
		return f, false
	}
	return f, true
}

// flatten appends the prompt text of the field that wins: messages (an
// array), else input (with instructions first), else prompt.
func (p *Parser) flatten(dst, body []byte, f *fields) []byte {
	at := func(sp span) *scanner { return &scanner{b: body[:sp.end], i: sp.start} }
	switch {
	case f.messagesIsArray:
		return appendMessages(dst, at(f.messages))
	case f.input.exists():
		// Responses API: a string, or a list of messages / content items;
		// embeddings: a string or a list of strings.
		if f.instructions.exists() && body[f.instructions.start] == '"' {
			dst = append(dst, "system\n"...)
			dst = appendString(dst, at(f.instructions))
			dst = append(dst, '\n')
		}
		if s := at(f.input); s.peek() == '[' && firstElementIsObject(s) {
			return appendMessages(dst, s)
		}
		return appendStrings(dst, at(f.input))
	case f.prompt.exists():
		return appendStrings(dst, at(f.prompt))
	}
	return dst
}

func firstElementIsObject(s *scanner) bool {
	probe := *s
	probe.i++
	return probe.peek() == '{'
}

// appendString appends a string value's decoded text (the scanner is at it).
func appendString(dst []byte, s *scanner) []byte {
	raw, _ := s.str()
	return appendUnescaped(dst, raw)
}

// appendMessages writes each message as "role\ncontent\n". The content is
// copied straight from the body; only a role given after the content (or
// given twice) moves the message's text to make room.
func appendMessages(dst []byte, s *scanner) []byte {
	s.array(func() bool {
		msg := len(dst)
		dst = append(dst, '\n') // role "" until one is read
		prefix := 1
		if s.peek() != '{' {
			dst = append(dst, '\n')
			return s.value()
		}
		ok := s.object(func(key []byte) bool {
			switch {
			case keyIs(key, "role"):
				var buf [64]byte
				role := buf[:0]
				if s.peek() == '"' {
					role = appendString(role, s)
				} else if !s.value() {
					return false
				}
				role = append(role, '\n')
				dst = slices.Replace(dst, msg, msg+prefix, role...)
				prefix = len(role)
				return true
			case keyIs(key, "content"):
				dst = appendContent(dst[:msg+prefix], s)
				return true
			}
			return s.value()
		})
		dst = append(dst, '\n')
		return ok
	})
	return dst
}

// appendContent writes a message's content: a string, or parts whose text
// (a string part, or field "text") is written in order; other parts (images,
// audio) are skipped.
func appendContent(dst []byte, s *scanner) []byte {
	switch s.peek() {
	case '"':
		return appendString(dst, s)
	case '[':
		s.array(func() bool {
			switch s.peek() {
			case '"':
				dst = appendString(dst, s)
				return true
			case '{':
				part := len(dst)
				return s.object(func(key []byte) bool {
					if !keyIs(key, "text") {
						return s.value()
					}
					dst = dst[:part] // a repeated key counts from its last occurrence
					if s.peek() == '"' {
						dst = appendString(dst, s)
						return true
					}
					return s.value()
				})
			}
			return s.value()
		})
	default:
		s.value()
	}
	return dst
}

// appendStrings writes a string, or a list's strings joined by newlines
// (other elements, such as token IDs, are skipped).
func appendStrings(dst []byte, s *scanner) []byte {
	switch s.peek() {
	case '"':
		return appendString(dst, s)
	case '[':
		first := true
		s.array(func() bool {
			if s.peek() != '"' {
				return s.value()
			}
			if !first {
				dst = append(dst, '\n')
			}
			first = false
			dst = appendString(dst, s)
			return true
		})
	}
	return dst
}
