package serve

import (
	"errors"
	"testing"

	"github.com/spf13/pflag"
)

func TestListenRegistersItsFlagsAndChecksItsPortsFirst(t *testing.T) {
	grpc, health, metrics, bind := 9002, 9003, 9090, ""
	l := ExtProcListen(&grpc, &health, &metrics, &bind)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	l.AddFlags(fs)
	if err := fs.Parse([]string{"--grpc-port=9100", "--metrics-port=9100", "--bind-address=127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if grpc != 9100 || metrics != 9100 || health != 9003 || bind != "127.0.0.1" {
		t.Fatalf("parsed grpc %d health %d metrics %d bind %q", grpc, health, metrics, bind)
	}
	if got, want := errors.Join(l.Check(Port{"--models-port", -1})...).Error(),
		"--grpc-port and --metrics-port are both 9100\n--models-port -1 is out of range"; got != want {
		t.Fatalf("Check: %q, want %q", got, want)
	}
	own := Listen{Ports: []PortFlag{{"port", &grpc, "p"}}, BindAddress: &bind, BindUsage: "where"}
	fs = pflag.NewFlagSet("own", pflag.ContinueOnError)
	own.AddFlags(fs)
	if f := fs.Lookup("bind-address"); f == nil || f.Usage != "where" || fs.Lookup("port") == nil {
		t.Fatalf("a process's own usage is not kept: %+v", f)
	}
}
