// Package extproc reads the ext_proc streams of igw's ext_proc servers (the
// body-based router and the endpoint picker), builds the messages they send
// Envoy and reads the header values Envoy sends them, so that both speak the
// protocol the same way.
package extproc

import (
	"errors"
	"io"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/wire"
)

// Recv returns the stream's next message; nil, with a nil error, once Envoy
// has ended the stream (EOF, or the request cancelled), which is no failure.
func Recv(srv extprocv3.ExternalProcessor_ProcessServer) (*extprocv3.ProcessingRequest, error) {
	req, err := srv.Recv()
	if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
		return nil, nil
	}
	return req, err
}

// Serve reads one ext_proc stream until Envoy ends it, handing each message
// to handle; the protocol_config that a stream's first message carries goes to
// announced (when not nil) before its message is handled. It returns the first
// error of the stream or of handle.
func Serve(srv extprocv3.ExternalProcessor_ProcessServer, announced func(*extprocv3.ProtocolConfiguration),
	handle func(*extprocv3.ProcessingRequest) error) error {
	for {
		req, err := Recv(srv)
		if req == nil {
			return err
		}
		if pc := req.GetProtocolConfig(); pc != nil && announced != nil {
			announced(pc)
		}
		if err := handle(req); err != nil {
			return err
		}
	}
}

// SetHeader sets key to value, replacing any value the request has. The value
// goes in raw_value: Envoy ignores value when raw_value is set.
func SetHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// HeaderValue reads a header Envoy sent: raw_value, or value from older proxies.
func HeaderValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return hv.GetValue()
}

// Routed wraps a header mutation that changes where the request goes: it
// clears the route cache, so that HTTPRoute matches see the new headers. nil
// for no mutation.
func Routed(m *extprocv3.HeaderMutation) *extprocv3.CommonResponse {
	if m == nil {
		return nil
	}
	return &extprocv3.CommonResponse{HeaderMutation: m, ClearRouteCache: true}
}

// RequestHeaders answers the request headers with cr (nil: unchanged).
func RequestHeaders(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
}

// ResponseHeaders answers the response headers with cr (nil: unchanged).
func ResponseHeaders(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
}

// RequestBody answers a buffered request body with cr (nil: unchanged).
func RequestBody(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: cr}}}
}

// ResponseBody answers a buffered response body, unchanged.
func ResponseBody() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{}}}
}

// RequestTrailers answers the request trailers, unchanged.
func RequestTrailers() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{}}}
}

// ResponseTrailers answers the response trailers, unchanged.
func ResponseTrailers() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{}}}
}

// RequestChunk returns one chunk of a FULL_DUPLEX_STREAMED request body;
// endOfStream marks the last.
func RequestChunk(chunk []byte, endOfStream bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: streamedBody(chunk, endOfStream)}}
}

// ResponseChunk returns one chunk of a FULL_DUPLEX_STREAMED response body.
func ResponseChunk(chunk []byte, endOfStream bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: streamedBody(chunk, endOfStream)}}
}

func streamedBody(chunk []byte, endOfStream bool) *extprocv3.BodyResponse {
	return &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
			Body: chunk, EndOfStream: endOfStream}}}}}
}

// AppendRequestChunks appends a held request body, returned unchanged in the
// chunks it came in (an empty body as one empty chunk). The last chunk ends
// the stream unless trailers follow.
func AppendRequestChunks(dst []*extprocv3.ProcessingResponse, chunks [][]byte, trailersFollow bool) []*extprocv3.ProcessingResponse {
	if len(chunks) == 0 {
		return append(dst, RequestChunk(nil, !trailersFollow))
	}
	for i, c := range chunks {
		dst = append(dst, RequestChunk(c, !trailersFollow && i == len(chunks)-1))
	}
	return dst
}

// Immediate answers the client with e in OpenAI's error shape, instead of
// proxying the request. component ("bbr", "epp") prefixes the code in the
// details Envoy logs, igw_<component>_<code>, so that an access log tells who
// answered.
func Immediate(component string, e *apierror.Error) *extprocv3.ProcessingResponse {
	set := []*corev3.HeaderValueOption{SetHeader(wire.HeaderContentType, "application/json")}
	if e.RetryAfterSeconds > 0 {
		set = append(set, SetHeader(wire.HeaderRetryAfter, strconv.Itoa(e.RetryAfterSeconds)))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    e.JSON(),
			Details: "igw_" + component + "_" + e.Code,
		}}}
}

// Route is the request path's replies once a destination is picked: dest
// (an endpoint, then its fallbacks, comma-separated) in the destination
// header, clearing the route cache, and in the envoy.lb metadata, on the
// headers reply, or on the body reply when Envoy buffered the body
// (requestBuffered); then, streamed, the held body chunks unchanged.
// headersOnly: the request has no body.
func Route(dest string, requestBuffered, headersOnly bool, chunks [][]byte) []*extprocv3.ProcessingResponse {
	decision := Routed(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{SetHeader(wire.HeaderDestinationEndpoint, dest)}})
	inBodyReply := requestBuffered && !headersOnly
	var first *extprocv3.ProcessingResponse
	if inBodyReply {
		first = RequestBody(decision)
	} else {
		first = RequestHeaders(decision)
	}
	first.DynamicMetadata, _ = structpb.NewStruct(map[string]any{
		wire.MetadataNamespaceLB: map[string]any{wire.MetadataKeyDestinationEndpoint: dest},
	})
	replies := make([]*extprocv3.ProcessingResponse, 0, 1+max(1, len(chunks)))
	replies = append(replies, first)
	if !headersOnly && !inBodyReply {
		replies = AppendRequestChunks(replies, chunks, false)
	}
	return replies
}

// BodyModes reads the body modes Envoy announces in a stream's first
// message: requestBuffered when Envoy waits for the headers reply before
// sending the body in one message, responseChunked when each response chunk
// is answered on its own, without a streamed body mutation.
func BodyModes(pc *extprocv3.ProtocolConfiguration) (requestBuffered, responseChunked bool) {
	return pc.GetRequestBodyMode() == filterv3.ProcessingMode_BUFFERED,
		pc.GetResponseBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// HeaderMap is the headers Envoy sent, keys lower-cased.
func HeaderMap(h *corev3.HeaderMap) map[string]string {
	out := make(map[string]string, len(h.GetHeaders()))
	for _, hv := range h.GetHeaders() {
		out[strings.ToLower(hv.GetKey())] = HeaderValue(hv)
	}
	return out
}

// Send sends replies in order.
func Send(srv extprocv3.ExternalProcessor_ProcessServer, replies []*extprocv3.ProcessingResponse) error {
	for _, reply := range replies {
		if err := srv.Send(reply); err != nil {
			return err
		}
	}
	return nil
}

// Exchange is a routing server's side of one request's stream (the endpoint
// picker's, the hub's): each method answers one kind of message. The
// request's trailers are answered unchanged.
type Exchange interface {
	// RequestHeaders takes the headers and the proxy's metadata with them.
	RequestHeaders(*extprocv3.HttpHeaders, *corev3.Metadata) []*extprocv3.ProcessingResponse
	RequestBody(*extprocv3.HttpBody) []*extprocv3.ProcessingResponse
	ResponseHeaders(*extprocv3.HttpHeaders, map[string]*structpb.Struct) *extprocv3.ProcessingResponse
	ResponseBody(*extprocv3.HttpBody) *extprocv3.ProcessingResponse
	// ResponseTrailers is told that the response ended with trailers.
	ResponseTrailers()
}

// Dispatch hands req to the method of x for its kind and sends the replies.
func Dispatch(srv extprocv3.ExternalProcessor_ProcessServer, req *extprocv3.ProcessingRequest, x Exchange) error {
	var replies []*extprocv3.ProcessingResponse
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		replies = x.RequestHeaders(r.RequestHeaders, req.GetMetadataContext())
	case *extprocv3.ProcessingRequest_RequestBody:
		replies = x.RequestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		replies = []*extprocv3.ProcessingResponse{RequestTrailers()}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		replies = []*extprocv3.ProcessingResponse{x.ResponseHeaders(r.ResponseHeaders, req.GetAttributes())}
	case *extprocv3.ProcessingRequest_ResponseBody:
		replies = []*extprocv3.ProcessingResponse{x.ResponseBody(r.ResponseBody)}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		x.ResponseTrailers()
		replies = []*extprocv3.ProcessingResponse{ResponseTrailers()}
	default:
		return Unexpected(r)
	}
	return Send(srv, replies)
}

// Unexpected is the stream's error for a message of a kind the protocol does not have.
func Unexpected(m any) error {
	return status.Errorf(codes.InvalidArgument, "unexpected ext_proc message %T", m)
}

// HeldRequest is the request path of a server that holds a request until
// its body ends and then routes it (the endpoint picker, the hub): it counts
// the body against a limit and says when the request is whole.
type HeldRequest struct {
	// Buffered: Envoy waits for the headers reply before sending the body,
	// in one message (BUFFERED), as it announced (BodyModes).
	Buffered bool
	// HeadersOnly: the request ended with its headers, so it has no body phase.
	HeadersOnly bool
	// Size counts the body's bytes so far.
	Size int64
}

// Headers takes the request's headers message: whole when the request ended
// with it, to be routed now; otherwise the replies to send now (a buffered
// body comes only after the headers reply; a streamed one without it).
func (h *HeldRequest) Headers(m *extprocv3.HttpHeaders) (whole bool, replies []*extprocv3.ProcessingResponse) {
	switch {
	case m.GetEndOfStream():
		h.HeadersOnly = true
		return true, nil
	case h.Buffered:
		return false, []*extprocv3.ProcessingResponse{RequestHeaders(nil)}
	}
	return false, nil
}

// Body counts a body message against limit: tooLarge (a 413) once the body
// passes it, else whole when the body is complete. A buffered body is
// complete in its one message, even when trailers follow.
func (h *HeldRequest) Body(m *extprocv3.HttpBody, limit int64) (whole bool, tooLarge *apierror.Error) {
	h.Size += int64(len(m.GetBody()))
	if h.Size > limit {
		return false, apierror.TooLarge(limit)
	}
	return h.Buffered || m.GetEndOfStream(), nil
}
