package egext

import (
	"context"
	"errors"
	"fmt"
	"net"

	pb "github.com/envoyproxy/gateway/proto/extension"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/igw-dev/igw/internal/servingtls"
)

// Server answers Envoy Gateway's PostTranslateModify hook with Fix. Envoy
// Gateway must be configured to send listeners and routes (translation
// listener.includeAll and route.includeAll); clusters and secrets pass through.
// Liveness, when set, records every call.
type Server struct {
	pb.UnimplementedEnvoyGatewayExtensionServer
	Liveness *Liveness
}

// PostTranslateModify applies Fix to the translated listeners and routes.
func (s Server) PostTranslateModify(_ context.Context, req *pb.PostTranslateModifyRequest) (*pb.PostTranslateModifyResponse, error) {
	if err := Fix(req.GetListeners(), req.GetRoutes()); err != nil {
		err = status.Error(codes.InvalidArgument, err.Error())
		s.Liveness.Observe(HookPostTranslateModify, err)
		return nil, err
	}
	s.Liveness.Observe(HookPostTranslateModify, nil)
	return &pb.PostTranslateModifyResponse{
		Clusters:  req.GetClusters(),
		Secrets:   req.GetSecrets(),
		Listeners: req.GetListeners(),
		Routes:    req.GetRoutes(),
	}, nil
}

// MaxMessageBytes bounds a hook message; the translated listeners and routes of
// a gateway with many models exceed gRPC's 4 MiB default.
const MaxMessageBytes = 64 << 20

// Runnable serves the extension on Addr until its context ends; it runs on
// every operator replica, not only the leader, because Envoy Gateway may call
// any of them.
type Runnable struct {
	Addr string
	// Listening, when set, receives the bound address once the server listens.
	Listening chan<- net.Addr
	// Liveness, when set, records every call.
	Liveness *Liveness
	// TLS is the serving certificate, re-read while the server runs; nil
	// serves plaintext.
	TLS *servingtls.Certificate
}

// NeedLeaderElection reports false: the hook is stateless.
func (Runnable) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (r Runnable) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("envoy gateway extension server: %w", err)
	}
	if r.Listening != nil {
		r.Listening <- lis.Addr()
	}
	srv := grpc.NewServer(append(r.TLS.ServerOptions(), grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))...)
	go func() { _ = r.TLS.Watch(ctx) }()
	pb.RegisterEnvoyGatewayExtensionServer(srv, Server{Liveness: r.Liveness})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		return nil
	case err := <-done:
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	}
}
