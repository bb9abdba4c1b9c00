// Command igw-bench benchmarks routing policies on simulated LLM fleets; see
// pkg/bench/cli for the command line.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/igw-dev/igw/pkg/bench/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
