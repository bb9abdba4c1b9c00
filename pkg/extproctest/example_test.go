package extproctest_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/igw-dev/igw/pkg/extproctest"
)

// tagger holds the whole request body, then tags the request and returns the body
// unchanged: the shape of a full-duplex routing server.
type tagger struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (tagger) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	var body []byte
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		b := m.GetRequestBody()
		if b == nil {
			continue
		}
		body = append(body, b.GetBody()...)
		if !b.GetEndOfStream() {
			continue
		}
		set := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-tag", RawValue: []byte(fmt.Sprint(len(body)))}}
		replies := []*extprocv3.ProcessingResponse{
			{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{
					HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set}},
					ClearRouteCache: true,
				}}}},
			{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
					Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
						Body: body, EndOfStream: true}}}}}}},
		}
		for _, r := range replies {
			if err := s.Send(r); err != nil {
				return err
			}
		}
	}
}

func Example() {
	srv, err := extproctest.Serve(tagger{})
	if err != nil {
		panic(err)
	}
	defer srv.Stop()
	c, err := extproctest.Dial(srv.Addr, extproctest.Config{ChunkSize: 4})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	res, err := c.Process(context.Background(), extproctest.PostJSON("/v1/embeddings", []byte(`{"input":"hi"}`)))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.RequestHeaders.Get("x-tag"), res.RouteCacheCleared, string(res.RequestBody))
	// Output: 14 true {"input":"hi"}
}
