// Command igw-global is the global tier's hub: the global picker over member
// clusters, behind an ext_proc server for Envoy and, optionally, a
// standalone OpenAI front; see pkg/global/hub.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/igw-dev/igw/pkg/global/hub"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := hub.Main(ctx, "igw-global", os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
