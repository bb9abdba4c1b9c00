package extproc

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// sentStream keeps what is sent on it.
type sentStream struct {
	extprocv3.ExternalProcessor_ProcessServer
	sent []*extprocv3.ProcessingResponse
}

func (s *sentStream) Send(r *extprocv3.ProcessingResponse) error {
	s.sent = append(s.sent, r)
	return nil
}

// namingExchange answers each message with a reply of its kind and notes
// which method took it.
type namingExchange struct {
	calls []string
	md    *corev3.Metadata
}

func (x *namingExchange) RequestHeaders(_ *extprocv3.HttpHeaders, md *corev3.Metadata) []*extprocv3.ProcessingResponse {
	x.calls, x.md = append(x.calls, "request headers"), md
	return []*extprocv3.ProcessingResponse{RequestHeaders(nil), RequestChunk(nil, true)}
}

func (x *namingExchange) RequestBody(*extprocv3.HttpBody) []*extprocv3.ProcessingResponse {
	x.calls = append(x.calls, "request body")
	return nil // held
}

func (x *namingExchange) ResponseHeaders(*extprocv3.HttpHeaders, map[string]*structpb.Struct) *extprocv3.ProcessingResponse {
	x.calls = append(x.calls, "response headers")
	return ResponseHeaders(nil)
}

func (x *namingExchange) ResponseBody(*extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	x.calls = append(x.calls, "response body")
	return ResponseBody()
}

func (x *namingExchange) ResponseTrailers() { x.calls = append(x.calls, "response trailers") }

// Dispatch hands each kind of message to its method with the proxy's
// metadata, sends every reply in order (none for a held body), answers the
// request's trailers itself and refuses a message with no request.
func TestDispatchHandsEachKindToItsMethod(t *testing.T) {
	md := &corev3.Metadata{}
	srv, x := &sentStream{}, &namingExchange{}
	for _, req := range []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{}, MetadataContext: md},
		{Request: &extprocv3.ProcessingRequest_RequestBody{}},
		{Request: &extprocv3.ProcessingRequest_RequestTrailers{}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{}},
		{Request: &extprocv3.ProcessingRequest_ResponseTrailers{}},
	} {
		if err := Dispatch(srv, req, x); err != nil {
			t.Fatalf("%T: %v", req.Request, err)
		}
	}
	if want := []string{"request headers", "request body", "response headers", "response body", "response trailers"}; !slices.Equal(x.calls, want) {
		t.Errorf("calls %v, want %v", x.calls, want)
	}
	if x.md != md {
		t.Error("the request headers came without the proxy's metadata")
	}
	var kinds []string
	for _, r := range srv.sent {
		kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", r.Response), "*ext_procv3.ProcessingResponse_"))
	}
	if want := []string{"RequestHeaders", "RequestBody", "RequestTrailers", "ResponseHeaders", "ResponseBody", "ResponseTrailers"}; !slices.Equal(kinds, want) {
		t.Errorf("sent %v, want %v", kinds, want)
	}
	if err := Dispatch(srv, &extprocv3.ProcessingRequest{}, x); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a message with no request: %v, want InvalidArgument", err)
	}
}
