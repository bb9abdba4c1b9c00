// Command igw-gateway is igw's standalone gateway: the OpenAI API on one port,
// with the body-based router and the endpoint picker in process over
// endpoints from files; see pkg/gateway. It prints "listening on
// http://HOST:PORT" once it accepts requests.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/gateway"
)

func main() {
	o := gateway.NewOptions()
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	if err := o.Complete(); err != nil {
		fmt.Fprintln(os.Stderr, "igw-gateway:", err)
		os.Exit(2)
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "igw-gateway:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	g, err := gateway.New(o, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ready := make(chan struct{})
	go func() {
		<-ready
		fmt.Printf("listening on http://%s\n", g.Addr())
	}()
	if err := g.Run(ctx, ready); err != nil {
		log.Error("stopped", "error", err)
		os.Exit(1)
	}
}
