// Package requestbody reads what igw routes on from an OpenAI request body
// (chat completions, completions, responses, embeddings), in one pass over
// the bytes: the model, as the body-based router routes on it, and for the
// picker whether the response streams, the token limit, and the prompt text
// flattened into one string whose prefix is stable across turns of a
// conversation, for prefix affinity.
//
// The body is scanned in place with encoding/json's grammar, limits and error
// messages: the syntax is checked as the scan goes, strings are stepped over
// without decoding, and only the prompt field's text is decoded, straight
// into a buffer the Parser reuses between requests. No Go structures are
// built for the JSON. A body that arrives in pieces can be checked piece by
// piece (Stream).
package requestbody

import (
	"errors"
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

// Body is what one scan of a request body found, for both readers of it.
type Body struct {
	// Model, Found and Err are ExtractModel's answer for the body: the body-based router's view.
	Model string
	Found bool
	Err   error

	req   Request
	empty bool
}

// Request is the picker's view of the body: a body that is not one JSON
// object, or has no string model, is a 400 in the OpenAI error shape.
func (b Body) Request() (Request, *apierror.Error) {
	var notString *ModelTypeError
	switch {
	case b.empty:
		return Request{}, apierror.BadRequest("missing_body", "The request has no body; send an OpenAI JSON request.")
	case b.Err != nil && !errors.As(b.Err, &notString):
		return Request{}, apierror.BadRequest("invalid_json", "The request body must be one JSON object.")
	case b.Model == "":
		e := apierror.BadRequest("missing_model", "The request body must name a model in the `model` field.")
		e.Param = "model"
		return Request{}, e
	}
	return b.req, nil
}

// Parser parses bodies, reusing one prompt buffer. The zero value is ready.
// Not safe for concurrent use.
type Parser struct {
	buf []byte
}

// Cap is the capacity of p's buffer.
func (p *Parser) Cap() int { return cap(p.buf) }

// Grow makes p's buffer hold at least n bytes, so that parsing a large body
// (whose prompt is at most its length) allocates the buffer once rather
// than doubling it up to size.
func (p *Parser) Grow(n int) {
	if cap(p.buf) < n {
		p.buf = make([]byte, 0, n)
	}
}

// Parse reads body for the picker. The result's Prompt is owned by the caller.
func Parse(body []byte) (Request, *apierror.Error) {
	var p Parser
	return p.Parse(body)
}

// Parse reads body like the package's Parse, but the result's Prompt shares
// p's buffer: it is valid until the next call to p.
func (p *Parser) Parse(body []byte) (Request, *apierror.Error) { return p.Scan(body).Request() }

// Scan reads body once for both of its readers; the request's Prompt shares
// p's buffer, valid until the next call to p.
func (p *Parser) Scan(body []byte) Body {
	if len(body) == 0 {
		return Body{Err: &SyntaxError{msg: "unexpected end of JSON input"}, empty: true}
	}
	p.buf = p.buf[:0]
	s := &scanner{b: body}
	f, valid, isObject := scanBody(s, &p.buf)
	out := Body{}
	out.Model, out.Found, out.Err = f.model.result(body, s, valid, isObject)
	if out.Err != nil {
		return out
	}
	out.req = Request{Model: out.Model, Stream: f.stream}
	for _, v := range f.maxTokens {
		if v > 0 && v < 1e9 {
			out.req.MaxTokens = int(v)
			break
		}
	}
	out.req.Prompt = unsafe.String(unsafe.SliceData(p.buf), len(p.buf))
	return out
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
	model  modelMember
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

// scanBody checks the document's syntax and reads its top-level fields. With
// a prompt buffer it also decodes the prompt into *buf: the prompt field is
// decoded where the scan meets it, if it wins over the fields seen so far;
// only when a later key changes the winner (messages after prompt, say) is
// the winner decoded again from its span. Without one (nil) it reads only
// the model, which is all the body-based router needs.
func scanBody(s *scanner, buf *[]byte) (f fields, valid, isObject bool) {
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
		*buf, ok = appendSource((*buf)[:0], s, s.b, src)
		sp.end = s.i
		src.value.end = s.i
		f.written = src
		return ok
	}
	member := func(key []byte, escaped bool) bool {
		c := s.next()
		if keyIs(key, escaped, "model") {
			return f.model.read(s, c)
		}
		if buf == nil {
			return s.value()
		}
		switch {
		case keyIs(key, escaped, "stream"):
			f.stream = c == 't'
			return s.value()
		case keyIs(key, escaped, "messages"):
			return promptField(&f.messages, c == '[')
		case keyIs(key, escaped, "input"):
			return promptField(&f.input, true)
		case keyIs(key, escaped, "prompt"):
			return promptField(&f.prompt, true)
		case keyIs(key, escaped, "instructions"):
			f.instructions = span{}
			start := s.i
			ok := s.value()
			if c == '"' {
				f.instructions = span{start, s.i}
			}
			return ok
		}
		for i, k := range maxTokenKeys {
			if keyIs(key, escaped, k) {
				f.maxTokens[i] = 0
				if c == '-' || '0' <= c && c <= '9' {
					var ok bool
					f.maxTokens[i], ok = s.float()
					return ok
				}
				return s.value()
			}
		}
		return s.value()
	}
	valid, isObject = s.document(member)
	if valid && buf != nil {
		if src := f.source(); src != f.written {
			*buf, _ = appendSource((*buf)[:0], &scanner{b: s.b[:src.value.end], i: src.value.start}, s.b, src)
		}
	}
	return f, valid, isObject
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
		if s.next() == '[' && firstElementIsObject(s) {
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
	return probe.next() == '{'
}

// appendMessages writes each message as "role\ncontent\n". The content is
// decoded straight after the role already written; a role given after the
// content moves the message's text once, at its end, however many keys
// follow.
func appendMessages(dst []byte, s *scanner) ([]byte, bool) {
	ok := s.array(func() bool {
		if s.next() != '{' {
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
		ok := s.object(func(key []byte, escaped bool) bool {
			switch {
			case keyIs(key, escaped, "role"):
				role = nil
				if s.next() == '"' {
					var ok bool
					if role, _, ok = s.rawString(); !ok {
						return false
					}
				} else if !s.value() {
					return false
				}
				if stale = true; !content {
					setRole() // nothing after it yet: no move
				}
				return true
			case keyIs(key, escaped, "content"):
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
	switch s.next() {
	case '"':
		return s.appendText(dst)
	case '[':
		ok := s.array(func() bool {
			switch s.next() {
			case '"':
				var ok bool
				dst, ok = s.appendText(dst)
				return ok
			case '{':
				part := len(dst)
				return s.object(func(key []byte, escaped bool) bool {
					if !keyIs(key, escaped, "text") {
						return s.value()
					}
					dst = dst[:part] // a repeated key counts from its last occurrence
					if s.next() == '"' {
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
	switch s.next() {
	case '"':
		return s.appendText(dst)
	case '[':
		first := true
		ok := s.array(func() bool {
			if s.next() != '"' {
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
