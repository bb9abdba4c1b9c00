package servingtls_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/internal/servingtls/servingtlstest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serveHealth serves grpc.health.v1 with opts on a loopback port until the test ends.
func serveHealth(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// waitForSerial waits until new connections are served the certificate of serial.
func waitForSerial(t *testing.T, ca *servingtlstest.CA, addr string, serial int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := ca.ServedSerial(addr)
		if err == nil && got == serial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections are served serial %d (%v), want %d", got, err, serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startServing serves grpc.health.v1 over TLS with a certificate of serial 1
// that is re-read every 10 ms, until the test ends.
func startServing(t *testing.T) (ca *servingtlstest.CA, files servingtls.Files, cert *servingtls.Certificate, addr string) {
	t.Helper()
	ca = servingtlstest.NewCA(t)
	files = ca.WriteFiles(t, 1)
	cert, err := servingtls.Load(files, 10*time.Millisecond, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go cert.Run(ctx)
	return ca, files, cert, serveHealth(t, cert.ServerOption())
}

func TestTLSServesCallsReloadsAndRefusesPlaintext(t *testing.T) {
	ca, files, cert, addr := startServing(t)

	if err := servingtlstest.CheckHealth(addr, ca); err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	if err := servingtlstest.CheckHealth(addr, nil); err == nil {
		t.Fatal("a plaintext client completed a call")
	}
	if err := servingtlstest.CheckHealth(addr, servingtlstest.NewCA(t)); err == nil {
		t.Fatal("a client trusting another CA completed a call")
	}
	if got, err := ca.ServedSerial(addr); err != nil || got != 1 {
		t.Fatalf("serial %d (%v), want 1", got, err)
	}

	ca.Rotate(t, files, 2)
	waitForSerial(t, ca, addr, 2)
	if err := servingtlstest.CheckHealth(addr, ca); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	if st := cert.Status(); !st.Loaded || st.Error != "" {
		t.Fatalf("status %+v", st)
	}
}

// TestHalfReplacedPairKeepsTheOneInEffect: a certificate whose key has not
// been replaced yet does not load; the old pair is served until the key
// comes, then the new one.
func TestHalfReplacedPairKeepsTheOneInEffect(t *testing.T) {
	ca, files, cert, addr := startServing(t)

	newCert, newKey := ca.Issue(t, 2)
	if err := os.WriteFile(files.CertFile, newCert, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cert.Status().Error == "" {
		if time.Now().After(deadline) {
			t.Fatal("the mismatched pair was never read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := ca.ServedSerial(addr); err != nil || got != 1 {
		t.Fatalf("with a mismatched pair on disk: serial %d (%v), want the old 1", got, err)
	}
	if err := os.WriteFile(files.KeyFile, newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	waitForSerial(t, ca, addr, 2)
}

func TestLoadRefusesWhatCannotServe(t *testing.T) {
	ca := servingtlstest.NewCA(t)
	good := ca.WriteFiles(t, 1)
	other := ca.WriteFiles(t, 2)
	for name, tc := range map[string]struct {
		files servingtls.Files
		want  string
	}{
		"certificate without key": {servingtls.Files{CertFile: good.CertFile}, "go together"},
		"key without certificate": {servingtls.Files{KeyFile: good.KeyFile}, "go together"},
		"neither":                 {servingtls.Files{}, "no certificate"},
		"missing file":            {servingtls.Files{CertFile: good.CertFile + ".missing", KeyFile: good.KeyFile}, "no such file"},
		"key of another":          {servingtls.Files{CertFile: good.CertFile, KeyFile: other.KeyFile}, "does not match"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := servingtls.Load(tc.files, 0, quiet)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestFlagsAreTheSameInBothFlagPackages: the binaries use pflag, the manager
// the standard library; both get the same names.
func TestFlagsAreTheSameInBothFlagPackages(t *testing.T) {
	var a, b servingtls.Files
	pfs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	a.AddFlags(pfs, "the server")
	gfs := flag.NewFlagSet("y", flag.ContinueOnError)
	b.AddFlags(gfs, "the server")
	args := []string{"--tls-cert-file=/c", "--tls-key-file=/k"}
	if err := pfs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := gfs.Parse(args); err != nil {
		t.Fatal(err)
	}
	want := servingtls.Files{CertFile: "/c", KeyFile: "/k"}
	if a != want || b != want || !a.Enabled() || a.Validate() != nil {
		t.Fatalf("pflag %+v, flag %+v", a, b)
	}
}
