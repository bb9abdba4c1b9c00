// Package responsestream watches a model server's response as it passes
// through, without changing it: it counts the output events of a streamed
// (server-sent events) response, so their arrival times give the time to first
// token and the inter-token time, and it reads the OpenAI usage, streamed or not.
package responsestream

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// Usage is the token accounting the server reported.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
}

// Meter consumes response body chunks in order.
type Meter struct {
	// Streaming selects SSE parsing; otherwise the body is kept (up to
	// MaxBuffered bytes) and parsed as one JSON document at the end.
	Streaming   bool
	MaxBuffered int

	pending  []byte // an SSE line split across chunks
	body     []byte
	overflow bool
	usage    Usage
	hasUsage bool
}

// DefaultMaxBuffered bounds how much of a non-streamed body is kept for usage.
const DefaultMaxBuffered = 4 << 20

// maxLine bounds a single SSE line kept across chunks.
const maxLine = 1 << 20

// Feed consumes one chunk and returns how many output events (tokens, for
// servers that stream one token per event) it completed.
func (m *Meter) Feed(chunk []byte) int {
	if !m.Streaming {
		limit := m.MaxBuffered
		if limit <= 0 {
			limit = DefaultMaxBuffered
		}
		if !m.overflow && len(m.body)+len(chunk) <= limit {
			m.body = append(m.body, chunk...)
		} else {
			m.overflow, m.body = true, nil
		}
		return 0
	}
	events := 0
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if len(m.pending)+len(chunk) <= maxLine {
				m.pending = append(m.pending, chunk...)
			} else {
				m.pending = m.pending[:0] // absurd line: drop it rather than grow
			}
			break
		}
		line := chunk[:i]
		if len(m.pending) > 0 {
			m.pending = append(m.pending, line...)
			line = m.pending
		}
		events += m.line(line)
		m.pending = m.pending[:0]
		chunk = chunk[i+1:]
	}
	return events
}

var dataPrefix = []byte("data:")

func (m *Meter) line(line []byte) int {
	line = bytes.TrimRight(line, "\r")
	if !bytes.HasPrefix(line, dataPrefix) {
		return 0
	}
	data := bytes.TrimSpace(line[len(dataPrefix):])
	if len(data) == 0 || data[0] != '{' || !gjson.ValidBytes(data) {
		return 0 // "[DONE]" and anything unreadable
	}
	ev := gjson.ParseBytes(data)
	m.readUsage(ev)
	// Chat/completions chunks carry choices; the Responses API names its event type.
	if n := ev.Get("choices.#"); n.Int() > 0 {
		return 1
	}
	if ev.Get("type").Str == "response.output_text.delta" {
		return 1
	}
	return 0
}

func (m *Meter) readUsage(doc gjson.Result) {
	u := doc.Get("usage")
	if !u.IsObject() {
		u = doc.Get("response.usage") // Responses API completion event
	}
	if !u.IsObject() {
		return
	}
	m.hasUsage = true
	m.usage.PromptTokens = int(first(u, "prompt_tokens", "input_tokens"))
	m.usage.CompletionTokens = int(first(u, "completion_tokens", "output_tokens"))
	m.usage.CachedTokens = int(first(u, "prompt_tokens_details.cached_tokens", "input_tokens_details.cached_tokens"))
}

func first(u gjson.Result, paths ...string) int64 {
	for _, p := range paths {
		if v := u.Get(p); v.Type == gjson.Number && v.Num >= 0 && v.Num < 1e12 {
			return v.Int()
		}
	}
	return 0
}

// Finish ends the body and returns the usage, if the server reported one.
func (m *Meter) Finish() (Usage, bool) {
	if m.Streaming {
		if len(m.pending) > 0 {
			m.line(m.pending)
			m.pending = nil
		}
	} else if !m.overflow && gjson.ValidBytes(m.body) {
		m.readUsage(gjson.ParseBytes(m.body))
		m.body = nil
	}
	return m.usage, m.hasUsage
}
