package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/server"
	"github.com/igw-dev/igw/pkg/epp/telemetry"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/wire"
)

// Headers of the test gateway: headerSubset is turned into Envoy's subset
// hint (comma-separated ip:port); headerUpstream on the response names the
// endpoint the request went to.
const (
	headerSubset   = "x-test-subset"
	headerUpstream = "x-test-upstream"
)

// gateway plays Envoy in front of the simulators, over HTTP: each request goes
// through the EPP's real ext_proc server (request headers and body, then the
// upstream's response headers and every body chunk as it arrives, full
// duplex) and is proxied to the endpoint the EPP names. The EPP's response
// path therefore sees real streaming times and learns from them.
type gateway struct {
	t   *testing.T
	ext *extproctest.Client
	URL string
}

func startGateway(t *testing.T, d *director.Director) *gateway {
	t.Helper()
	g := &gateway{t: t, ext: extproctest.Start(t, &server.ExtProc{Director: d}, extproctest.Config{})}
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	g.URL = front.URL
	return g
}

// client is an OpenAI client of the gateway that never retries (a retry
// would hide a failed pick).
func (g *gateway) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.serve(w, r); err != nil {
		g.t.Errorf("test gateway: %s %s: %v", r.Method, r.URL.Path, err)
	}
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	// Not the client's context: a client that stops reading after [DONE]
	// ends the exchange below by a closed stream, as Envoy's reset would,
	// rather than by cancelling a message in flight.
	stream, err := g.ext.Stream(context.WithoutCancel(r.Context()))
	if err != nil {
		return err
	}
	defer stream.CloseSend()
	h := extproctest.NewHeaders(":method", r.Method, ":path", r.URL.Path, ":authority", r.Host,
		"content-type", r.Header.Get("Content-Type"), "content-length", strconv.Itoa(len(body)))
	for _, k := range []string{wire.HeaderDebug, wire.HeaderPriority} {
		if v := r.Header.Get(k); v != "" {
			h = append(h, extproctest.Header{Key: k, Value: v})
		}
	}
	first := extproctest.RequestHeadersMessage(h, false)
	if s := r.Header.Get(headerSubset); s != "" {
		hint, _ := structpb.NewStruct(map[string]any{wire.MetadataKeyDestinationSubset: s})
		first.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{wire.MetadataNamespaceSubsetHint: hint}}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	if err := stream.Send(extproctest.RequestBodyMessage(body, true)); err != nil {
		return err
	}

	reply, err := stream.Recv()
	if err != nil {
		return err
	}
	if ir := reply.GetImmediateResponse(); ir != nil {
		setHeaders(w.Header(), ir.GetHeaders())
		w.WriteHeader(int(ir.GetStatus().GetCode()))
		_, _ = w.Write(ir.GetBody())
		return nil
	}
	var dest string
	for _, o := range reply.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if o.GetHeader().GetKey() == wire.HeaderDestinationEndpoint {
			dest = string(o.GetHeader().GetRawValue())
		}
	}
	primary, _, _ := strings.Cut(dest, ",")
	if primary == "" {
		return errors.New("the EPP named no destination")
	}
	var forward bytes.Buffer
	for {
		reply, err := stream.Recv()
		if err != nil {
			return err
		}
		sr := reply.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		forward.Write(sr.GetBody())
		if sr.GetEndOfStream() {
			break
		}
	}

	up, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+primary+r.URL.Path, &forward)
	if err != nil {
		return err
	}
	up.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: protoHeaders(":status", strconv.Itoa(resp.StatusCode),
			"content-type", resp.Header.Get("Content-Type"))}}}); err != nil {
		return err
	}
	if reply, err = stream.Recv(); err != nil {
		return err
	}
	setHeaders(w.Header(), reply.GetResponseHeaders().GetResponse().GetHeaderMutation())
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.Header().Set(headerUpstream, primary)
	w.WriteHeader(resp.StatusCode)

	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			if r.Context().Err() != nil {
				return nil // the client left; closing the stream tells the EPP, as Envoy's reset does
			}
			return rerr
		}
		eos := rerr != nil
		if n > 0 || eos {
			msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: bytes.Clone(buf[:n]), EndOfStream: eos}}}
			if err := stream.Send(msg); err != nil {
				return err
			}
			reply, err := stream.Recv()
			if err != nil {
				return err
			}
			_, _ = w.Write(reply.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody())
			w.(http.Flusher).Flush()
		}
		if eos {
			return nil
		}
	}
}

func protoHeaders(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

func setHeaders(dst http.Header, m interface {
	GetSetHeaders() []*corev3.HeaderValueOption
}) {
	for _, o := range m.GetSetHeaders() {
		dst.Set(o.GetHeader().GetKey(), string(o.GetHeader().GetRawValue()))
	}
}

// served is what the client saw of one request.
type served struct {
	// Upstream is the endpoint that answered; Breakdown the EPP's score
	// breakdown header (the request asks for it).
	Upstream, Breakdown string
	Usage               openai.CompletionUsage
}

// chat sends one streamed chat completion for model "m" through the gateway,
// asking for the score breakdown; headers are extra request headers as key,
// value pairs.
func chat(t *testing.T, c openai.Client, system, user string, headers ...string) served {
	t.Helper()
	out, err := chatModel(c, "m", system, user, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// chatModel is chat for any model (a base model or an adapter) that reports
// a failure instead of ending the test, so that it can run concurrently; the
// endpoint that answered is set even when the request failed.
func chatModel(c openai.Client, model, system, user string, headers ...string) (served, error) {
	var resp *http.Response
	opts := []option.RequestOption{option.WithResponseInto(&resp), option.WithHeader(wire.HeaderDebug, "1")}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(user)},
		MaxTokens:     openai.Int(4),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, opts...)
	var out served
	for stream.Next() {
		if u := stream.Current().Usage; u.TotalTokens > 0 {
			out.Usage = u
		}
	}
	if resp != nil {
		out.Upstream, out.Breakdown = resp.Header.Get(headerUpstream), resp.Header.Get(wire.HeaderScoreBreakdown)
	}
	if err := stream.Err(); err != nil {
		return out, fmt.Errorf("chat for %s through the gateway (answered by %q): %w", model, out.Upstream, err)
	}
	if out.Upstream == "" {
		return out, errors.New("the gateway did not say where the request went")
	}
	return out, nil
}

// term is the raw score of scorer name in a breakdown header
// ("...;name=raw*weight;..."); -1 when absent.
func term(breakdown, name string) float64 {
	for _, f := range strings.Split(breakdown, ";") {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			raw, _, _ := strings.Cut(v, "*")
			if x, err := strconv.ParseFloat(raw, 64); err == nil {
				return x
			}
		}
	}
	return -1
}

// scrapeContinuously runs s every 50 ms until the test ends.
func scrapeContinuously(t *testing.T, s *telemetry.Scraper) {
	t.Helper()
	s.Interval, s.Timeout = 50*time.Millisecond, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
