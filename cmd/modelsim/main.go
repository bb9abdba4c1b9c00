// Command modelsim is a simulated vLLM model server on a simulated GPU; see
// pkg/sim. It prints "listening on http://HOST:PORT" once it accepts requests.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/igw-dev/igw/internal/version"
	"github.com/igw-dev/igw/pkg/sim"
)

func main() {
	opts := sim.DefaultOptions()
	if err := opts.KVEvents.KVEventsFromEnv(os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "modelsim:", err)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("modelsim", flag.ExitOnError)
	opts.AddFlags(fs)
	printVersion := fs.Bool("version", false, version.FlagUsage)
	_ = fs.Parse(os.Args[1:])
	if *printVersion {
		fmt.Println(version.String("modelsim"))
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "modelsim: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "modelsim:", err)
		os.Exit(1)
	}
}

func run(opts sim.Options) error {
	srv, err := sim.NewServer(opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return err
	}
	if pub := srv.KVEvents(); pub != nil {
		fmt.Printf("kv events on %s\n", pub.Endpoint)
		if pub.ReplayEndpoint != "" {
			fmt.Printf("kv events replay on %s\n", pub.ReplayEndpoint)
		}
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Serve(ctx, ln)
}
