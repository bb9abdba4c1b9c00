package responsestream

import (
	"testing"
)

const chatStream = "data: {\"id\":\"1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n" +
	"data: {\"id\":\"1\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n" +
	"data: {\"id\":\"1\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n" +
	"data: [DONE]\n\n"

func TestStreamedEventsAcrossAnySplit(t *testing.T) {
	for size := 1; size <= len(chatStream); size++ {
		m := Meter{Streaming: true}
		events := 0
		for i := 0; i < len(chatStream); i += size {
			events += m.Feed([]byte(chatStream[i:min(i+size, len(chatStream))]))
		}
		u, ok := m.Finish()
		if events != 3 || !ok || u.PromptTokens != 12 || u.CompletionTokens != 2 || u.CachedTokens != 8 {
			t.Fatalf("chunk size %d: events %d usage %+v %v", size, events, u, ok)
		}
	}
}

func TestResponsesAPIAndCRLF(t *testing.T) {
	s := "event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\r\n\r\n" +
		"event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\r\n\r\n"
	m := Meter{Streaming: true}
	if n := m.Feed([]byte(s)); n != 1 {
		t.Fatalf("events %d", n)
	}
	if u, ok := m.Finish(); !ok || u.PromptTokens != 3 || u.CompletionTokens != 1 {
		t.Fatalf("usage %+v", u)
	}
}

func TestNonStreamedUsage(t *testing.T) {
	m := Meter{}
	m.Feed([]byte(`{"choices":[{"message":{"content":"hi"}}],`))
	m.Feed([]byte(`"usage":{"prompt_tokens":5,"completion_tokens":7}}`))
	if u, ok := m.Finish(); !ok || u.CompletionTokens != 7 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	big := Meter{MaxBuffered: 10}
	big.Feed([]byte(`{"usage":{"prompt_tokens":5,"completion_tokens":7}}`))
	if _, ok := big.Finish(); ok {
		t.Fatal("usage read beyond the buffer bound")
	}
}

func FuzzMeter(f *testing.F) {
	f.Add([]byte(chatStream), uint8(7), true)
	f.Add([]byte(`{"usage":{"completion_tokens":3}}`), uint8(2), false)
	f.Fuzz(func(t *testing.T, body []byte, size uint8, streaming bool) {
		n := int(size%64) + 1
		m := Meter{Streaming: streaming}
		events := 0
		for i := 0; i < len(body); i += n {
			events += m.Feed(body[i:min(i+n, len(body))])
		}
		u, _ := m.Finish()
		if events < 0 || events > len(body) || u.CompletionTokens < 0 || u.PromptTokens < 0 {
			t.Fatalf("events %d usage %+v", events, u)
		}
		// Splitting must not change what is counted.
		whole := Meter{Streaming: streaming}
		got := whole.Feed(body)
		wu, _ := whole.Finish()
		if got != events || wu != u {
			t.Fatalf("split into %d-byte chunks: %d events %+v; whole: %d %+v", n, events, u, got, wu)
		}
	})
}
