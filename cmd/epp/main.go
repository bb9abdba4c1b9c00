// Command epp is igw's Endpoint Picker: an Envoy ext_proc server that routes
// each inference request to the model-server pod predicted to answer first.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/runner"
)

func main() {
	o := options.New()
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	o.Complete()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "epp:", err)
		os.Exit(2)
	}
	r, err := runner.New(o, log)
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
