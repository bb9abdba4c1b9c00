package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/logging"
)

// Main runs the hub's command line args (without the program name) until ctx
// ends and returns the exit code (internal/command's). It prints "listening on
// http://HOST:PORT" on stdout once it serves: the standalone front's address
// with --http-port, else the metrics port's. The log is JSON on stderr at
// --log-level.
func Main(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	o := NewOptions()
	var h *Hub
	return command.Run(ctx, command.Command{
		Name:    name,
		Options: o,
		Logs:    logging.RouteGRPC,
		Build: func(*slog.Logger) (command.Process, error) {
			log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.Level()}))
			if o.HTTPPort != 0 {
				o.SetMemoryLimit(log) // the standalone front buffers bodies within its budget
			}
			var err error
			h, err = New(o, log)
			return h, err
		},
		Listening: func(stdout io.Writer) {
			addr := h.Addr("http")
			if addr == "" {
				addr = h.Addr("metrics")
			}
			fmt.Fprintf(stdout, "listening on http://%s\n", addr)
		},
	}, args, stdout, stderr)
}
