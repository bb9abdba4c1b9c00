package extproctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/pkg/wire"
)

// BodyMode is how bodies travel to the server, as configured on Envoy's ext_proc filter.
type BodyMode int

const (
	// FullDuplexStreamed sends the body in chunks as they arrive, without waiting for
	// replies; the server answers with streamed_response chunks. This is the igw wire
	// contract and the default.
	FullDuplexStreamed BodyMode = iota
	// Buffered sends the whole body in one message after the headers reply, and
	// waits for one body reply.
	Buffered
	// Streamed sends the body in chunks after the headers reply, without waiting;
	// the server answers each chunk with one body reply, in order, which may
	// replace the chunk but not carry a streamed_response or change headers.
	// Envoy allows failure_mode_allow with it, unlike FullDuplexStreamed.
	Streamed
)

func (m BodyMode) String() string {
	return m.proto().String()
}

func (m BodyMode) proto() filterv3.ProcessingMode_BodySendMode {
	switch m {
	case Buffered:
		return filterv3.ProcessingMode_BUFFERED
	case Streamed:
		return filterv3.ProcessingMode_STREAMED
	}
	return filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// DefaultChunkSize is the request body chunk size when Config.ChunkSize is zero.
const DefaultChunkSize = 16 << 10

// maxMessageBytes bounds gRPC messages both ways; buffered bodies travel whole.
const maxMessageBytes = 256 << 20

// Config is the part of Envoy's ext_proc filter configuration the client plays.
type Config struct {
	RequestBodyMode  BodyMode
	ResponseBodyMode BodyMode
	// ChunkSize splits the request body in FullDuplexStreamed mode (DefaultChunkSize if 0).
	ChunkSize int
	// DialOptions apply after the defaults (plaintext, large messages), so a
	// transport credentials option (TLS) replaces plaintext.
	DialOptions []grpc.DialOption
}

// Request is one HTTP request as it reaches Envoy, and optionally the upstream's answer.
type Request struct {
	Headers Headers
	Body    []byte
	// Trailers, when non-nil, are sent after the body (which then does not carry end_of_stream).
	Trailers Headers
	// MetadataContext is attached to every message, as Envoy does for forwarded namespaces
	// (for example the envoy.lb.subset_hint filter metadata).
	MetadataContext *corev3.Metadata
	// Response, when non-nil, is played after the request path completes without an
	// immediate response.
	Response *Response
}

// Response is what the upstream sends back.
type Response struct {
	Headers Headers // include ":status"
	// Chunks is the body as the upstream sends it: one message per chunk in
	// FullDuplexStreamed mode, concatenated into one message in Buffered mode.
	Chunks   [][]byte
	Trailers Headers
	// Pace, in FullDuplexStreamed mode, is the pause before each message after
	// the headers: an upstream that generates its answer token by token keeps
	// the stream open that long.
	Pace time.Duration
	// Attributes are the filter's response_attributes as Envoy evaluated them
	// (for example upstream.address), sent with the response headers under
	// the ext_proc filter's name, as Envoy sends them with a direction's
	// first message; values as structpb.NewValue takes them.
	Attributes map[string]any
}

// Chunk is one body piece the server returned.
type Chunk struct {
	Body        []byte
	EndOfStream bool
}

// ImmediateResponse is the local reply the server asked Envoy to send.
type ImmediateResponse struct {
	Status  int
	Headers Headers // as Envoy would send them, after the server's mutations
	Body    []byte
	Details string
}

// Result is what the exchange did to the request and response.
type Result struct {
	// RequestHeaders are the headers forwarded upstream. In FullDuplexStreamed mode Envoy
	// drops content-length (the body may change size), and so does the client.
	RequestHeaders  Headers
	RequestBody     []byte
	RequestTrailers Headers
	// RouteCacheCleared is true when Envoy would recompute the route: a request-path reply
	// set clear_route_cache together with a header_mutation (Envoy ignores the flag otherwise).
	RouteCacheCleared bool
	// DynamicMetadata holds the merged dynamic metadata the server set, by namespace.
	DynamicMetadata map[string]map[string]any
	// ImmediateResponse is non-nil when the server answered the client itself.
	ImmediateResponse *ImmediateResponse
	// Response path (zero unless Request.Response was set and played).
	ResponseHeaders  Headers
	ResponseChunks   []Chunk // the server's body replies, in order
	ResponseBody     []byte  // ResponseChunks concatenated: what the client receives
	ResponseTrailers Headers
	// Ignored lists mutations Envoy would drop silently; a non-empty list usually means a
	// server bug that a test should catch.
	Ignored []string
	// RequestPathTime is how long the request path took, from the first
	// message to the reply that let Envoy send the request upstream: the time
	// the server adds before the request reaches the model server.
	RequestPathTime time.Duration
	// Messages is every reply the server sent, in order, for protocol-level assertions.
	Messages []*extprocv3.ProcessingResponse
}

// Client plays Envoy's ext_proc filter against one server. It is safe for concurrent
// use; every Process call is one HTTP request on its own stream.
type Client struct {
	cfg  Config
	conn *grpc.ClientConn
	ext  extprocv3.ExternalProcessorClient
}

// Dial connects to an ext_proc server at addr (host:port), in plaintext unless
// cfg.DialOptions say otherwise.
func Dial(addr string, cfg Config) (*Client, error) {
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes))},
		cfg.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("extproctest: dial %s: %w", addr, err)
	}
	return &Client{cfg: cfg, conn: conn, ext: extprocv3.NewExternalProcessorClient(conn)}, nil
}

// ProcessOnce sends req on a connection of its own to addr, as a proxy that
// has just connected does, then closes it; it waits at most 10 s.
func ProcessOnce(addr string, cfg Config, req Request) (*Result, error) {
	c, err := Dial(addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Process(ctx, req)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Stream opens a raw ext_proc stream, for tests that need message-level control
// (for example, checking that a server replies before the body ends).
func (c *Client) Stream(ctx context.Context) (extprocv3.ExternalProcessor_ProcessClient, error) {
	return c.ext.Process(ctx)
}

// Process sends req through the server as Envoy would and returns what came out.
// An error means Envoy would fail the request: a transport failure, a protocol
// violation by the server (a spurious or out-of-order reply), or a mutation Envoy rejects.
func (c *Client) Process(ctx context.Context, req Request) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	x, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	reqPhase := c.requestPhase(req)
	start := time.Now()
	if err := x.run(reqPhase); err != nil {
		return x.res, err
	}
	x.res.RequestPathTime = time.Since(start)
	x.res.RequestHeaders, x.res.RequestBody, x.res.RequestTrailers = reqPhase.headers, reqPhase.body, reqPhase.trailers

	if req.Response != nil && x.res.ImmediateResponse == nil {
		respPhase := &phase{
			dir: responsePath, mode: c.cfg.ResponseBodyMode,
			headers: req.Response.Headers.clone(), chunks: nonEmpty(req.Response.Chunks, c.cfg.ResponseBodyMode),
			trailers: req.Response.Trailers.clone(), hasTrailers: req.Response.Trailers != nil, metadata: req.MetadataContext,
			pace: req.Response.Pace,
		}
		if req.Response.Attributes != nil {
			attrs, err := structpb.NewStruct(req.Response.Attributes)
			if err != nil {
				return x.res, fmt.Errorf("extproctest: response attributes: %w", err)
			}
			respPhase.attributes = map[string]*structpb.Struct{wire.ExtProcAttributesKey: attrs}
		}
		if err := x.run(respPhase); err != nil {
			return x.res, err
		}
		x.res.ResponseHeaders, x.res.ResponseBody, x.res.ResponseTrailers = respPhase.headers, respPhase.body, respPhase.trailers
		x.res.ResponseChunks = respPhase.returned
	}
	return x.res, x.finish()
}

// open starts one exchange on a new stream; cancelling ctx ends it.
func (c *Client) open(ctx context.Context) (*exchange, error) {
	stream, err := c.ext.Process(ctx)
	if err != nil {
		return nil, fmt.Errorf("extproctest: open stream: %w", err)
	}
	return &exchange{
		stream: stream,
		res:    &Result{DynamicMetadata: map[string]map[string]any{}},
		protocolConfig: &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  c.cfg.RequestBodyMode.proto(),
			ResponseBodyMode: c.cfg.ResponseBodyMode.proto(),
		},
	}, nil
}

// requestPhase is req's request path as Envoy plays it.
func (c *Client) requestPhase(req Request) *phase {
	return &phase{
		dir: requestPath, mode: c.cfg.RequestBodyMode,
		headers: req.Headers.clone(), chunks: split(req.Body, c.cfg.ChunkSize, c.cfg.RequestBodyMode),
		trailers: req.Trailers.clone(), hasTrailers: req.Trailers != nil, metadata: req.MetadataContext,
	}
}

// exchange is one ext_proc stream: the request path and then the response path.
type exchange struct {
	stream         extprocv3.ExternalProcessor_ProcessClient
	res            *Result
	protocolConfig *extprocv3.ProtocolConfiguration // sent once, on the first message
}

func (x *exchange) send(m *extprocv3.ProcessingRequest) error {
	if x.protocolConfig != nil {
		m.ProtocolConfig, x.protocolConfig = x.protocolConfig, nil
	}
	return x.stream.Send(m)
}

func (x *exchange) recv() (*extprocv3.ProcessingResponse, error) {
	m, err := x.stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("extproctest: the server closed the stream before processing completed")
	}
	if err != nil {
		return nil, fmt.Errorf("extproctest: ext_proc stream failed: %w", err)
	}
	x.res.Messages = append(x.res.Messages, m)
	x.mergeMetadata(m)
	if m.GetModeOverride() != nil {
		x.res.Ignored = append(x.res.Ignored, "mode_override: not played by extproctest")
	}
	return m, nil
}

// mergeMetadata merges each namespace's fields, as Envoy's setDynamicMetadata does.
func (x *exchange) mergeMetadata(m *extprocv3.ProcessingResponse) {
	for ns, v := range m.GetDynamicMetadata().GetFields() {
		fields := v.GetStructValue()
		if fields == nil {
			x.res.Ignored = append(x.res.Ignored, fmt.Sprintf("dynamic_metadata %q: namespace value is not a struct", ns))
			continue
		}
		if x.res.DynamicMetadata[ns] == nil {
			x.res.DynamicMetadata[ns] = map[string]any{}
		}
		for k, fv := range fields.AsMap() {
			x.res.DynamicMetadata[ns][k] = fv
		}
	}
}

// finish half-closes the stream as Envoy does when the HTTP stream ends, and waits for
// the server to end its side; anything it sends now is a protocol violation.
func (x *exchange) finish() error {
	if err := x.stream.CloseSend(); err != nil {
		return fmt.Errorf("extproctest: close send: %w", err)
	}
	for {
		m, err := x.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if x.res.ImmediateResponse != nil {
			// Envoy has stopped listening: late replies and errors do not matter.
			if err != nil {
				return nil
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("extproctest: ext_proc stream ended with an error after processing: %w", err)
		}
		x.res.Messages = append(x.res.Messages, m)
		return fmt.Errorf("extproctest: spurious message after processing completed: %v", m)
	}
}

func immediateFrom(ir *extprocv3.ImmediateResponse, ignored *[]string) (*ImmediateResponse, error) {
	status := 200 // Envoy's default for a missing or invalid status
	if code := int(ir.GetStatus().GetCode()); code >= 200 {
		status = code
	} else if ir.GetStatus() != nil {
		*ignored = append(*ignored, fmt.Sprintf("immediate_response: invalid status %d replaced by 200", code))
	}
	var h Headers
	if len(ir.GetBody()) > 0 {
		h = NewHeaders("content-type", "text/plain", "content-length", strconv.Itoa(len(ir.GetBody())))
	}
	if err := applyHeaderMutation(&h, ir.GetHeaders(), ignored); err != nil {
		return nil, fmt.Errorf("extproctest: immediate_response headers: %w", err)
	}
	return &ImmediateResponse{Status: status, Headers: h, Body: ir.GetBody(), Details: ir.GetDetails()}, nil
}

// split cuts body into chunks of at most size bytes; Buffered mode keeps it whole.
func split(body []byte, size int, mode BodyMode) [][]byte {
	if len(body) == 0 {
		return nil
	}
	if mode == Buffered {
		return [][]byte{body}
	}
	var out [][]byte
	for len(body) > size {
		out = append(out, body[:size])
		body = body[size:]
	}
	return append(out, body)
}

// nonEmpty drops empty upstream chunks (they carry nothing) and, in Buffered mode,
// joins the rest into one message as Envoy buffers them.
func nonEmpty(chunks [][]byte, mode BodyMode) [][]byte {
	var out [][]byte
	for _, c := range chunks {
		if len(c) > 0 {
			out = append(out, c)
		}
	}
	if mode == Buffered && len(out) > 1 {
		var all []byte
		for _, c := range out {
			all = append(all, c...)
		}
		out = [][]byte{all}
	}
	return out
}
