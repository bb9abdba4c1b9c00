package extproctest

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/igw-dev/igw/internal/extproc"
)

// Passthrough is the protocol floor of a FULL_DUPLEX_STREAMED ext_proc server,
// for benchmarks to measure a real server against in the same run: it holds
// the request headers reply until the body ends, sets SetHeaders then (with
// clear_route_cache; none: the headers pass unchanged), returns the body
// chunks without reading them and streams the response back unchanged.
type Passthrough struct {
	extprocv3.UnimplementedExternalProcessorServer
	SetHeaders Headers
}

// Process answers one stream.
func (p Passthrough) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	var chunks [][]byte
	for {
		req, err := srv.Recv()
		if err != nil {
			return nil
		}
		var out []*extprocv3.ProcessingResponse
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestBody:
			chunks = append(chunks, r.RequestBody.GetBody())
			if r.RequestBody.GetEndOfStream() {
				out = extproc.AppendRequestChunks([]*extprocv3.ProcessingResponse{extproc.RequestHeaders(p.mutation())}, chunks, false)
			}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = append(out, extproc.ResponseHeaders(nil))
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = append(out, extproc.ResponseChunk(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream()))
		}
		for _, m := range out {
			if err := srv.Send(m); err != nil {
				return err
			}
		}
	}
}

func (p Passthrough) mutation() *extprocv3.CommonResponse {
	if len(p.SetHeaders) == 0 {
		return nil
	}
	set := make([]*corev3.HeaderValueOption, len(p.SetHeaders))
	for i, h := range p.SetHeaders {
		set[i] = extproc.SetHeader(h.Key, h.Value)
	}
	return extproc.Routed(&extprocv3.HeaderMutation{SetHeaders: set})
}
