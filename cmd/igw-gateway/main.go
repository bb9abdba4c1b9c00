// Command igw-gateway is igw's standalone gateway: the OpenAI API on one port,
// with the body-based router and igw's endpoint picker in process over
// endpoints from files or a cluster's InferencePool; see pkg/gateway. It prints "listening on
// http://HOST:PORT" once it accepts requests.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/igw-dev/igw/pkg/gateway"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := gateway.Main(ctx, "igw-gateway", os.Args[1:], nil, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
