// Package command is the whole of a thin main for igw's serving commands
// (bbr, epp, and the gateway's through gateway.Main): flags, checks, the JSON
// log, signals and exit codes in one place, so that each main only names its
// options and its process.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/version"
)

// Process is a configured process: Run serves until ctx ends and closes
// ready, when not nil, once it listens.
type Process interface {
	Run(ctx context.Context, ready chan<- struct{}) error
}

// Command describes one command.
type Command struct {
	// Name names the flag set and prefixes the messages about the command
	// line ("bbr: ...").
	Name string
	// Options, when set, are the command's options: their flags are on the
	// command line and Check is their Complete and Validate. Flags and Check
	// are for options of another shape.
	Options Options
	// Flags registers the options on the command line.
	Flags func(*pflag.FlagSet)
	// Check completes and validates the parsed options.
	Check func() error
	// Logs, when set, routes the logs of libraries the process links into
	// its log (logging.RouteGRPC, kubelog.RouteSlog): process-wide, so only
	// for a command's own process.
	Logs func(*slog.Logger)
	// Build makes the process from the checked options.
	Build func(*slog.Logger) (Process, error)
	// Listening, when set, is called once the process listens, with stdout.
	Listening func(stdout io.Writer)
}

// Serving is the command of a process built from its options alone: name's
// options o, the library logs routed by logs (nil: none), the process built
// by build from the checked o.
func Serving[O Options, P Process](name string, o O, logs func(*slog.Logger), build func(O, *slog.Logger) (P, error)) Command {
	return Command{Name: name, Options: o, Logs: logs, Build: func(log *slog.Logger) (Process, error) { return build(o, log) }}
}

// Run runs the command line args (without the program name) until ctx ends
// and returns the exit code: 2 for bad flags, 1 when the process cannot
// start or fails, 0 after --help or --version (which every command has). The log is JSON on stderr.
func Run(ctx context.Context, c Command, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	check := c.Check
	if c.Options != nil {
		c.Options.AddFlags(fs)
		check = func() error { return Check(c.Options) }
	} else {
		c.Flags(fs)
	}
	printVersion := fs.Bool("version", false, version.FlagUsage)
	if err := Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2 // Parse has said why
	}
	if *printVersion {
		fmt.Fprintln(stdout, version.String(c.Name))
		return 0
	}
	if err := check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if c.Logs != nil {
		c.Logs(log)
	}
	p, err := c.Build(log)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	var ready chan struct{}
	if c.Listening != nil {
		ready = make(chan struct{})
		go func() {
			<-ready
			c.Listening(stdout)
		}()
	}
	if err := p.Run(ctx, ready); err != nil {
		log.Error("stopped", "error", err)
		return 1
	}
	return 0
}

// Parse parses args into fs. A bad command line is reported on fs's output
// with a usage line, and returned; after --help (the flags printed) the error
// is pflag.ErrHelp. pflag itself reports nothing with ContinueOnError.
func Parse(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(fs.Output(), "%s: %v\nusage: %s [flags] ('%s --help' lists them)\n", fs.Name(), err, fs.Name(), fs.Name())
	}
	return err
}

// Options are a command's options: flags, then completion and validation.
type Options interface {
	AddFlags(*pflag.FlagSet)
	Complete()
	Validate() error
}

// ParseOptions parses args into o's flags, then completes and validates o:
// what a command line does to the options, without the process (for tests).
func ParseOptions(name string, o Options, args []string) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return Check(o)
}

// Check completes and validates o, as after its flags are parsed.
func Check(o Options) error {
	o.Complete()
	return o.Validate()
}

// Main runs the process's own command line until SIGINT or SIGTERM and exits
// with Run's code.
func Main(c Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, c, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
