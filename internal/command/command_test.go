package command

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/version"
)

type process struct{ ran *bool }

func (p process) Run(context.Context, chan<- struct{}) error { *p.ran = true; return nil }

// run runs a command with one --port flag that must be positive.
func run(args ...string) (stdout, stderr string, code int, ran bool) {
	port := 0
	c := Command{
		Name:  "demo",
		Flags: func(fs *pflag.FlagSet) { fs.IntVar(&port, "port", 1, "the port") },
		Check: func() error {
			if port < 1 {
				return errors.New("--port must be positive")
			}
			return nil
		},
		Build: func(*slog.Logger) (Process, error) { return process{&ran}, nil },
	}
	var out, errs bytes.Buffer
	code = Run(context.Background(), c, args, &out, &errs)
	return out.String(), errs.String(), code, ran
}

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		ran       bool
		out, errs string
	}{
		{args: nil, code: 0, ran: true},
		{args: []string{"--version"}, code: 0, out: "demo " + version.Version + " ("},
		{args: []string{"--help"}, code: 0, errs: "--port int"},
		{args: []string{"--port", "x"}, code: 2, errs: "usage: demo [flags] ('demo --help' lists them)"},
		{args: []string{"--frobnicate"}, code: 2, errs: "demo: unknown flag: --frobnicate"},
		{args: []string{"-port", "3"}, code: 2, errs: "usage: demo [flags]"},
		{args: []string{"--port=0"}, code: 2, errs: "demo: --port must be positive"},
	} {
		out, errs, code, ran := run(tc.args...)
		if code != tc.code || ran != tc.ran || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.errs) {
			t.Errorf("%q: exit %d, ran %v, stdout %q, stderr %q; want exit %d, ran %v, stdout with %q, stderr with %q",
				tc.args, code, ran, out, errs, tc.code, tc.ran, tc.out, tc.errs)
		}
	}
}

// portOptions are options with one --port flag that must be positive.
type portOptions struct{ port int }

func (o *portOptions) AddFlags(fs *pflag.FlagSet) { fs.IntVar(&o.port, "port", 1, "the port") }
func (o *portOptions) Complete()                  {}
func (o *portOptions) Validate() error {
	if o.port < 1 {
		return errors.New("--port must be positive")
	}
	return nil
}

func TestServingBuildsFromCheckedOptions(t *testing.T) {
	var built int
	c := Serving("demo", &portOptions{}, nil, func(o *portOptions, _ *slog.Logger) (process, error) {
		built = o.port
		return process{new(bool)}, nil
	})
	var out, errs bytes.Buffer
	if code := Run(context.Background(), c, []string{"--port=7"}, &out, &errs); code != 0 || built != 7 {
		t.Errorf("exit %d, built with port %d, stderr %q; want exit 0, port 7", code, built, errs.String())
	}
	if code := Run(context.Background(), c, []string{"--port=0"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "demo: --port must be positive") {
		t.Errorf("exit %d, stderr %q; want exit 2 and the check's error", code, errs.String())
	}
}
