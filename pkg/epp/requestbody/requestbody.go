// Package requestbody reads what the picker needs from an OpenAI request body
// (chat completions, completions, responses, embeddings): the model, whether
// the response streams, the token limit, and the prompt text flattened into
// one string whose prefix is stable across turns of a conversation, for prefix
// affinity.
//
// The body is scanned once, in place: the syntax is checked as the scan goes,
// and the prompt field's text is decoded straight into a buffer the Parser
// reuses between requests. No Go structures are built for the JSON.
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
	f, ok := p.scan(body)
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
	r.Prompt = unsafe.String(unsafe.SliceData(p.buf), len(p.buf))
	return r, nil
}

// span is a value's position in the body; end 0 means absent.
type span struct{ start, end int }

func (s span) exists() bool { return s.end > 0 }

// Where the prompt text comes from, in order of precedence.
const (
	noPrompt = iota
	fromPrompt
	fromInput
	fromMessages
)

// source is the field whose text is the prompt (and, for input, the
// instructions written before it).
type source struct {
	kind                int
	value, instructions span
}

// fields is what the scan found. A repeated key counts from its last
// occurrence, as in encoding/json.
type fields struct {
	model  string
	stream bool
	// maxTokens: max_tokens, max_completion_tokens, max_output_tokens, in order of precedence.
	maxTokens [3]float64
	// The prompt fields; messages counts only as an array, instructions only
	// as a string.
	messages, input, instructions, prompt span
	// written is the source whose text the buffer holds.
	written source
}

var maxTokenKeys = [3]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// source is the prompt's source given the fields seen so far.
func (f *fields) source() source {
	switch {
	case f.messages.exists():
		return source{kind: fromMessages, value: f.messages}
	case f.input.exists():
		return source{kind: fromInput, value: f.input, instructions: f.instructions}
	case f.prompt.exists():
		return source{kind: fromPrompt, value: f.prompt}
	}
	return source{}
}

// scan checks body's syntax, reads the scalar fields, and decodes the prompt
// into p.buf. The prompt field is decoded where the scan meets it, if it wins
// over the fields seen so far; only when a later key changes the winner
// (messages after prompt, say) is the winner decoded again from its span.
func (p *Parser) scan(body []byte) (fields, bool) {
	var f fields
	p.buf = p.buf[:0]
	s := &scanner{b: body}
	if s.peek() != '{' {
		return f, false
	}
	// promptField reads a prompt field's value into *sp; counts tells
	// whether its type lets it count (a messages string does not).
	promptField := func(sp *span, counts bool) bool {
		start := s.i
		*sp = span{}
		if !counts {
			return s.value()
		}
		*sp = span{start, start + 1} // present, end not known yet
		src := f.source()
		if src.value.start != start {
			ok := s.value()
			sp.end = s.i
			return ok
		}
		var ok bool
		p.buf, ok = appendSource(p.buf[:0], s, body, src)
		sp.end = s.i
		src.value.end = s.i
		f.written = src
		return ok
	}
	ok := s.object(func(key []byte) bool {
		switch c := s.peek(); {
		case keyIs(key, "model"):
			f.model = ""
			if c == '"' {
				var ok bool
				f.model, ok = s.text()
				return ok
			}
			return s.value()
		case keyIs(key, "stream"):
			f.stream = c == 't'
			return s.value()
		case keyIs(key, "messages"):
			return promptField(&f.messages, c == '[')
		case keyIs(key, "input"):
			return promptField(&f.input, true)
		case keyIs(key, "prompt"):
			return promptField(&f.prompt, true)
		case keyIs(key, "instructions"):
			f.instructions = span{}
			start := s.i
			ok := s.value()
			if c == '"' {
				f.instructions = span{start, s.i}
			}
			return ok
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
	if src := f.source(); src != f.written {
		p.buf, _ = appendSource(p.buf[:0], &scanner{b: body[:src.value.end], i: src.value.start}, body, src)
	}
	return f, true
}

// appendSource writes src's prompt text; s is at src's value and consumes it.
func appendSource(dst []byte, s *scanner, body []byte, src source) ([]byte, bool) {
	switch src.kind {
	case fromMessages:
		return appendMessages(dst, s)
	case fromInput:
		// Responses API: a string, or a list of messages / content items;
		// embeddings: a string or a list of strings.
		if in := src.instructions; in.exists() {
			dst = append(dst, "system\n"...)
			dst, _ = (&scanner{b: body[:in.end], i: in.start}).appendText(dst)
			dst = append(dst, '\n')
		}
		if s.peek() == '[' && firstElementIsObject(s) {
			return appendMessages(dst, s)
		}
		return appendStrings(dst, s)
	case fromPrompt:
		return appendStrings(dst, s)
	}
	return dst, true
}

func firstElementIsObject(s *scanner) bool {
	probe := *s
	probe.i++
	return probe.peek() == '{'
}

// appendMessages writes each message as "role\ncontent\n". The content is
// decoded straight after the role already written; a role given after the
// content moves the message's text once, at its end, however many keys
// follow.
func appendMessages(dst []byte, s *scanner) ([]byte, bool) {
	ok := s.array(func() bool {
		if s.peek() != '{' {
			dst = append(dst, '\n', '\n')
			return s.value()
		}
		msg := len(dst)
		dst = append(dst, '\n') // role "" until one is read
		prefix := 1
		var role []byte // the latest role's raw text
		stale := false  // the written role is not the latest
		setRole := func() {
			var buf [64]byte
			text := append(appendUnescaped(buf[:0], role), '\n')
			dst = slices.Replace(dst, msg, msg+prefix, text...)
			prefix, stale = len(text), false
		}
		content := false
		ok := s.object(func(key []byte) bool {
			switch {
			case keyIs(key, "role"):
				role = nil
				if s.peek() == '"' {
					role, _ = s.str()
				} else if !s.value() {
					return false
				}
				if stale = true; !content {
					setRole() // nothing after it yet: no move
				}
				return true
			case keyIs(key, "content"):
				if dst = dst[:msg+prefix]; stale {
					setRole() // the previous content is dropped: no move
				}
				var ok bool
				dst, ok = appendContent(dst, s)
				content = true
				return ok
			}
			return s.value()
		})
		if stale {
			setRole()
		}
		dst = append(dst, '\n')
		return ok
	})
	return dst, ok
}

// appendContent writes a message's content: a string, or parts whose text
// (a string part, or field "text") is written in order; other parts (images,
// audio) are skipped.
func appendContent(dst []byte, s *scanner) ([]byte, bool) {
	switch s.peek() {
	case '"':
		return s.appendText(dst)
	case '[':
		ok := s.array(func() bool {
			switch s.peek() {
			case '"':
				var ok bool
				dst, ok = s.appendText(dst)
				return ok
			case '{':
				part := len(dst)
				return s.object(func(key []byte) bool {
					if !keyIs(key, "text") {
						return s.value()
					}
					dst = dst[:part] // a repeated key counts from its last occurrence
					if s.peek() == '"' {
						var ok bool
						dst, ok = s.appendText(dst)
						return ok
					}
					return s.value()
				})
			}
			return s.value()
		})
		return dst, ok
	}
	return dst, s.value()
}

// appendStrings writes a string, or a list's strings joined by newlines
// (other elements, such as token IDs, are skipped).
func appendStrings(dst []byte, s *scanner) ([]byte, bool) {
	switch s.peek() {
	case '"':
		return s.appendText(dst)
	case '[':
		first := true
		ok := s.array(func() bool {
			if s.peek() != '"' {
				return s.value()
			}
			if !first {
				dst = append(dst, '\n')
			}
			first = false
			var ok bool
			dst, ok = s.appendText(dst)
			return ok
		})
		return dst, ok
	}
	return dst, s.value()
}
