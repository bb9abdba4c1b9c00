package extproctest

import (
	"net"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// Server is an ext_proc gRPC server listening on a free 127.0.0.1 port.
type Server struct {
	// Addr is the host:port to Dial.
	Addr string
	grpc *grpc.Server
}

// Serve starts srv on a free loopback port. opts are applied after defaults that
// allow large buffered bodies, so they may override them.
func Serve(srv extprocv3.ExternalProcessorServer, opts ...grpc.ServerOption) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}, opts...)
	g := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(g, srv)
	go func() { _ = g.Serve(lis) }() // Serve returns when Stop is called
	return &Server{Addr: lis.Addr().String(), grpc: g}, nil
}

// Stop closes the listener and every open stream.
func (s *Server) Stop() { s.grpc.Stop() }

// TB is the part of testing.TB the helpers need; Ginkgo's GinkgoT() satisfies it too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Start serves srv and returns a client connected to it; both are closed when the
// test ends.
func Start(t TB, srv extprocv3.ExternalProcessorServer, cfg Config, opts ...grpc.ServerOption) *Client {
	t.Helper()
	s, err := Serve(srv, opts...)
	if err != nil {
		t.Fatalf("extproctest: serve: %v", err)
	}
	t.Cleanup(s.Stop)
	c, err := Dial(s.Addr, cfg)
	if err != nil {
		t.Fatalf("extproctest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// PostJSON is the request an OpenAI client sends: POST path with a JSON body.
func PostJSON(path string, body []byte) Request {
	return Request{
		Headers: NewHeaders(
			":method", "POST",
			":path", path,
			":scheme", "http",
			":authority", "gateway.local",
			"content-type", "application/json",
			"content-length", strconv.Itoa(len(body)),
		),
		Body: body,
	}
}
