// Command igw-bench-gateway is the gateway the live benchmark starts: the
// standalone gateway (cmd/igw-gateway, pkg/gateway) with the benchmark's
// baseline policies registered beside igw (pkg/bench/livegateway), so that
// `igw-bench run --mode live` compares every policy through the same proxy.
// Its flags are igw-gateway's; --policy also takes the baselines' names.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/igw-dev/igw/pkg/bench/livegateway"
	"github.com/igw-dev/igw/pkg/gateway"
)

func main() {
	reg, err := livegateway.Registry()
	if err != nil {
		fmt.Fprintln(os.Stderr, "igw-bench-gateway:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := gateway.Main(ctx, "igw-bench-gateway", os.Args[1:], reg, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
