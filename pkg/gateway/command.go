package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
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
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := o.Complete(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	g, err := New(o, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	ready := make(chan struct{})
	go func() {
		<-ready
		fmt.Fprintf(stdout, "listening on http://%s\n", g.Addr())
	}()
	if err := g.Run(ctx, ready); err != nil {
		log.Error("stopped", "error", err)
		return 1
	}
	return 0
}
