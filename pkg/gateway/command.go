package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/logging/kubelog"
)

// Main runs the gateway's command line args (without the program name) until
// ctx ends, with the policies of reg besides igw (nil: igw alone), and
// returns the exit code: 2 for bad flags, 1 when the gateway cannot start or
// fails. It prints "listening on http://HOST:PORT" on stdout once it accepts
// requests and logs JSON on stderr. cmd/igw-gateway and
// cmd/igw-bench-gateway are this and a registry.
func Main(ctx context.Context, name string, args []string, reg *Registry, stdout, stderr io.Writer) int {
	o := NewOptions()
	o.Policies = reg
	var g *Gateway
	return command.Run(ctx, command.Command{
		Name:  name,
		Flags: o.AddFlags,
		Check: func() error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Validate()
		},
		// A pool that follows an InferencePool reads it with client-go and
		// controller-runtime: their logs join the gateway's JSON log.
		Logs: func(log *slog.Logger) {
			if o.Resolved.discovers() {
				kubelog.RouteSlog(log)
			}
		},
		Build: func(log *slog.Logger) (command.Process, error) {
			o.SetMemoryLimit(log)
			var err error
			g, err = New(o, log)
			return g, err
		},
		Listening: func(stdout io.Writer) { fmt.Fprintf(stdout, "listening on http://%s\n", g.Addr()) },
	}, args, stdout, stderr)
}
