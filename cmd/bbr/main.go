// Command bbr is igw's Body-Based Router: an Envoy ext_proc server that reads the
// model from OpenAI request bodies and sets the header HTTPRoutes match on.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/bbr"
)

func main() {
	o := bbr.NewOptions()
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	o.Complete()
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bbr:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	r, err := bbr.NewRunner(o, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx, nil); err != nil {
		log.Error("stopped", "error", err)
		os.Exit(1)
	}
}
