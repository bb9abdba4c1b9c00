package sim

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// renderer renders one request's answer: whole, or as the server-sent events
// of output tokens [from, to) (the last with done and the finish event).
type renderer interface {
	whole(fin Event) []byte
	chunk(from, to int, done bool, fin Event) []byte
}

// responder renders one request's response in vLLM's JSON shapes. Streams are
// assembled by appending bytes, not by reflection, because one simulator
// process serves hundreds of streams.
type responder struct {
	gen     *generation
	details bool
	// head is `{"id":..,"object":..,"created":..,"model":..,` shared by every chunk.
	head []byte
	buf  []byte
}

func newResponder(gen *generation, id uint64, details bool) *responder {
	idPrefix, object := "cmpl-", "text_completion"
	switch {
	case gen.chat && gen.stream:
		idPrefix, object = "chatcmpl-", "chat.completion.chunk"
	case gen.chat:
		idPrefix, object = "chatcmpl-", "chat.completion"
	}
	head := []byte(`{"id":"` + idPrefix + strconv.FormatUint(id, 16) + `","object":"` + object + `","created":`)
	head = strconv.AppendInt(head, time.Now().Unix(), 10)
	head = append(head, `,"model":`...)
	head = appendJSONString(head, gen.model)
	head = append(head, ',')
	return &responder{gen: gen, details: details, head: head}
}

func (r *responder) finishReason() string {
	if r.gen.endsWithStop {
		return "stop"
	}
	return "length"
}

// chunk renders the SSE events for output tokens [from, to): the role delta
// before the first token of a chat, one chunk carrying the new text (and the
// finish reason when done), then the usage chunk and [DONE] at the end.
func (r *responder) chunk(from, to int, done bool, fin Event) []byte {
	b := r.buf[:0]
	if r.gen.chat && from == 0 {
		b = append(b, "data: "...)
		b = append(b, r.head...)
		b = append(b, `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
		b = r.appendContinuousUsage(b, from)
		b = append(b, "}\n\n"...)
	}
	if to > from || done {
		b = append(b, "data: "...)
		b = append(b, r.head...)
		if r.gen.chat {
			b = append(b, `"choices":[{"index":0,"delta":{"content":`...)
			b = appendJSONString(b, tokenizer.OutputText(from, to-from))
			b = append(b, `},"logprobs":null,"finish_reason":`...)
		} else {
			b = append(b, `"choices":[{"index":0,"text":`...)
			b = appendJSONString(b, tokenizer.OutputText(from, to-from))
			b = append(b, `,"logprobs":null,"finish_reason":`...)
		}
		if done {
			b = append(b, '"')
			b = append(b, r.finishReason()...)
			b = append(b, `","stop_reason":null}]`...)
		} else {
			b = append(b, `null,"stop_reason":null}]`...)
		}
		b = r.appendContinuousUsage(b, to)
		b = append(b, "}\n\n"...)
	}
	if done {
		if r.gen.includeUsage {
			b = append(b, "data: "...)
			b = append(b, r.head...)
			b = append(b, `"choices":[],`...)
			b = r.appendUsage(b, fin.Tokens, &fin)
			b = append(b, "}\n\n"...)
		}
		b = append(b, "data: [DONE]\n\n"...)
	}
	r.buf = b
	return b
}

func (r *responder) appendContinuousUsage(b []byte, tokens int) []byte {
	if !r.gen.continuousUsage {
		return b
	}
	b = append(b, ',')
	return r.appendUsage(b, tokens, nil)
}

// appendUsage renders "usage"; fin, known at the end, adds cached tokens.
func (r *responder) appendUsage(b []byte, completion int, fin *Event) []byte {
	prompt := len(r.gen.prompt)
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	if r.details && fin != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(fin.CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// whole renders a non-streamed response.
func (r *responder) whole(fin Event) []byte {
	text := tokenizer.OutputText(0, fin.Tokens)
	b := append([]byte(nil), r.head...)
	if r.gen.chat {
		b = append(b, `"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = appendJSONString(b, text)
		b = append(b, `},"logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `"choices":[{"index":0,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":"`...)
	}
	b = append(b, r.finishReason()...)
	b = append(b, `","stop_reason":null}],`...)
	b = r.appendUsage(b, fin.Tokens, &fin)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(b, '"')
}
