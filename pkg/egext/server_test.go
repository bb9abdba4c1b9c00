package egext_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	pb "github.com/envoyproxy/gateway/proto/extension"
	"google.golang.org/grpc"

	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/internal/servingtls/servingtlstest"
	"github.com/igw-dev/igw/pkg/egext"
)

// TestExtensionServerServesTLS: with a certificate the hook speaks TLS only,
// and a rotated certificate is served to new connections without a restart.
func TestExtensionServerServesTLS(t *testing.T) {
	ca := servingtlstest.NewCA(t)
	files := ca.WriteFiles(t, 1)
	cert, err := servingtls.Load(files, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening, done := make(chan net.Addr, 1), make(chan error, 1)
	go func() { done <- egext.Runnable{Addr: "127.0.0.1:0", Listening: listening, TLS: cert}.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := (<-listening).String()
	ca.CheckServes(t, addr, files, func(transport grpc.DialOption) error {
		return servingtlstest.Call(addr, transport, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := pb.NewEnvoyGatewayExtensionClient(conn).PostTranslateModify(ctx, &pb.PostTranslateModifyRequest{})
			return err
		})
	})
}
