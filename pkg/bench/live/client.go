package live

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/epp/responsestream"
	"github.com/igw-dev/igw/pkg/wire"
)

// outcome is what the client saw of one request, in wall time.
type outcome struct {
	id         uint64
	firstToken time.Time // zero: none
	finish     time.Time
	failed     bool
	// code is the status of a failed request (bench.CodeNoResponse when none came).
	code int
	err  string
	// endpoint is the "ip:port" the gateway named in its score breakdown.
	endpoint string
	usage    responsestream.Usage
}

// completionBody is the OpenAI completions request the client sends: the
// workload's prompt text (the simulator tokenizes it exactly as the workload
// did), the exact output length, streamed with usage.
type completionBody struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

// send posts one completion to the gateway and meters the stream as it
// arrives, with the same SSE meter the gateway uses.
func send(ctx context.Context, client *http.Client, url, model, prompt string, maxTokens int, id uint64) outcome {
	o := outcome{id: id}
	o.code = bench.CodeNoResponse
	fail := func(format string, a ...any) outcome {
		o.failed, o.finish, o.err = true, time.Now(), fmt.Sprintf(format, a...)
		return o
	}
	failErr := func(what string, err error) outcome {
		if os.IsTimeout(err) {
			o.code = bench.CodeClientTimeout
		}
		return fail("%s%v", what, err)
	}
	body, err := json.Marshal(completionBody{Model: model, Prompt: prompt, MaxTokens: maxTokens, Stream: true,
		StreamOptions: map[string]any{"include_usage": true}})
	if err != nil {
		return fail("encoding: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return fail("%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The breakdown names the endpoint, for the request's record.
	req.Header.Set(wire.HeaderDebug, "1")
	resp, err := client.Do(req)
	if err != nil {
		return failErr("", err)
	}
	defer resp.Body.Close()
	if b := resp.Header.Get(wire.HeaderScoreBreakdown); b != "" {
		first, _, _ := strings.Cut(b, ";")
		o.endpoint, _ = strings.CutPrefix(first, "endpoint=")
		if _, rerouted, ok := strings.Cut(b, ";rerouted="); ok {
			o.endpoint = rerouted
		}
	}
	if resp.StatusCode != http.StatusOK {
		o.code = resp.StatusCode
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fail("status %d: %s", resp.StatusCode, msg)
	}
	meter := responsestream.Meter{Streaming: true}
	buf := make([]byte, 16<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 && meter.Feed(buf[:n]) > 0 && o.firstToken.IsZero() {
			o.firstToken = time.Now()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return failErr("reading the stream: ", rerr)
		}
	}
	o.finish = time.Now()
	usage, ok := meter.Finish()
	if !ok || o.firstToken.IsZero() {
		return fail("the stream ended without tokens or usage")
	}
	o.usage = usage
	return o
}
