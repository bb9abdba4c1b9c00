// Package chatload is the steady load of the chaos tests: each worker's
// requests, three of four streamed chat completions and the rest whole ones,
// sent with the official openai-go client and judged as that client sees
// them.
package chatload

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Outcome is one request's end as its client saw it.
type Outcome struct {
	Err       error
	FirstByte bool // some of the answer had arrived
	// Response is the HTTP response when one came (nil otherwise), for its headers.
	Response *http.Response
}

// Send sends worker w's i-th request for model, answered in at most
// maxTokens tokens. An answer without a finish reason is an error: a stream
// that ends without one broke off.
func Send(ctx context.Context, c openai.Client, model string, maxTokens int64, w, i int) (o Outcome) {
	params := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("worker %d asks question %d", w, i))}}
	if i%4 == 3 {
		r, err := c.Chat.Completions.New(ctx, params, option.WithResponseInto(&o.Response))
		switch {
		case err != nil:
			o.Err = err
		case len(r.Choices) == 0 || r.Choices[0].FinishReason == "":
			o.Err = errors.New("a whole answer without a finish reason")
		}
		return o
	}
	s := c.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&o.Response))
	defer s.Close()
	finished := false
	for s.Next() {
		o.FirstByte = true
		for _, ch := range s.Current().Choices {
			finished = finished || ch.FinishReason != ""
		}
	}
	switch {
	case s.Err() != nil:
		o.Err = s.Err()
	case !finished:
		o.Err = errors.New("the stream ended without a finish reason")
	}
	return o
}

// Tally counts outcomes, the errors split by whether the client had
// received a first byte: a request that had not can still be sent elsewhere.
type Tally struct {
	Requests, OK int
	// BeforeFirstByte are errors of requests that had received nothing;
	// AfterFirstByte of streams that broke off after their first event.
	BeforeFirstByte, AfterFirstByte int
	Samples                         []string // errors before the first byte, the first few
}

// Add counts o.
func (t *Tally) Add(o Outcome) {
	t.Requests++
	switch {
	case o.Err == nil:
		t.OK++
	case o.FirstByte:
		t.AfterFirstByte++
	default:
		t.BeforeFirstByte++
		if len(t.Samples) < 5 {
			t.Samples = append(t.Samples, o.Err.Error())
		}
	}
}

// Sum adds u's counts (not its samples) to t.
func (t *Tally) Sum(u Tally) {
	t.Requests += u.Requests
	t.OK += u.OK
	t.BeforeFirstByte += u.BeforeFirstByte
	t.AfterFirstByte += u.AfterFirstByte
}
