// Package servingtls serves igw's gRPC servers (the picker's and the body
// router's ext_proc, the Envoy Gateway extension server) over TLS with a
// certificate and key read from files, typically a kubernetes.io/tls Secret
// mounted as a volume. The pair is re-read while the process runs, so a
// rotated certificate (cert-manager renewing the Secret) is served to new
// connections without a restart; connections already open keep theirs.
package servingtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/igw-dev/igw/pkg/filewatch"
)

// Flag names, the same in every binary.
const (
	CertFileFlag = "tls-cert-file"
	KeyFileFlag  = "tls-key-file"
)

// Files are the serving certificate (PEM, the chain leaf first) and its key.
// Both empty serves plaintext.
type Files struct {
	CertFile, KeyFile string
}

// FlagSet is the part of a flag set AddFlags needs: the standard library's
// flag.FlagSet and pflag.FlagSet both have it.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
}

// AddFlags registers --tls-cert-file and --tls-key-file; what names the server.
func (f *Files) AddFlags(fs FlagSet, what string) {
	fs.StringVar(&f.CertFile, CertFileFlag, f.CertFile, "PEM certificate (chain) "+what+" serves TLS with; re-read when it changes. Empty, with --"+KeyFileFlag+" empty: plaintext.")
	fs.StringVar(&f.KeyFile, KeyFileFlag, f.KeyFile, "PEM private key of --"+CertFileFlag+"; re-read when it changes.")
}

// Enabled reports whether TLS is configured.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

// Validate requires both files or neither.
func (f Files) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return fmt.Errorf("--%s and --%s go together: give both to serve TLS, or neither for plaintext", CertFileFlag, KeyFileFlag)
	}
	return nil
}

// DefaultInterval is how often the files are re-read.
const DefaultInterval = time.Second

// Certificate is the pair in effect, reloaded when either file changes. A
// pair that does not load (a file missing, or the key not the certificate's,
// as when only one of the two has been replaced yet) keeps the one in effect.
type Certificate struct {
	file    *filewatch.File
	current atomic.Pointer[tls.Certificate]
}

// Load reads the pair once; it fails when the pair does not load, so that a
// misconfigured server does not start.
func Load(f Files, interval time.Duration, log *slog.Logger) (*Certificate, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		return nil, errors.New("no certificate files given")
	}
	c := &Certificate{}
	c.file = &filewatch.File{
		Path:     f.CertFile + " and " + f.KeyFile,
		Interval: interval,
		What:     "serving certificate",
		Log:      log,
		// Both files in one content: a change to either reloads the pair,
		// and a half-replaced pair is retried until the other half comes.
		Read: func() ([]byte, error) {
			cert, err := os.ReadFile(f.CertFile)
			if err != nil {
				return nil, err
			}
			key, err := os.ReadFile(f.KeyFile)
			if err != nil {
				return nil, err
			}
			return joinPair(cert, key), nil
		},
		Apply: func(data []byte) error {
			cert, key := splitPair(data)
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return err
			}
			c.current.Store(&pair)
			return nil
		},
	}
	if err := c.file.Load(); err != nil {
		return nil, err
	}
	return c, nil
}

// pairSeparator cannot occur in a PEM file (it is ASCII text), so the joined
// content splits back exactly.
var pairSeparator = []byte{0}

func joinPair(cert, key []byte) []byte {
	return bytes.Join([][]byte{cert, key}, pairSeparator)
}

func splitPair(data []byte) (cert, key []byte) {
	cert, key, _ = bytes.Cut(data, pairSeparator)
	return cert, key
}

// Get returns the pair in effect, for tls.Config.GetCertificate: each new
// connection's handshake asks again, so it gets the latest pair.
func (c *Certificate) Get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current.Load(), nil
}

// Status is what a readiness endpoint says about the pair.
func (c *Certificate) Status() filewatch.Status { return c.file.Status() }

// Run re-reads the files until ctx ends.
func (c *Certificate) Run(ctx context.Context) { c.file.Run(ctx) }

// Config is a server TLS configuration that serves the pair in effect.
func (c *Certificate) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.Get}
}

// ServerOption makes a gRPC server speak TLS with the pair in effect.
func (c *Certificate) ServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(c.Config()))
}

// LoadIfSet is Load when f names files, and nil (plaintext) when it does not;
// the methods below take nil for plaintext, so that a server is set up the
// same way with and without TLS.
func LoadIfSet(f Files, log *slog.Logger) (*Certificate, error) {
	if !f.Enabled() {
		return nil, f.Validate()
	}
	return Load(f, DefaultInterval, log)
}

// ServerOptions are the options of a gRPC server serving c; none for nil.
func (c *Certificate) ServerOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	return []grpc.ServerOption{c.ServerOption()}
}

// Watch re-reads the files until ctx ends; it returns at once for nil.
func (c *Certificate) Watch(ctx context.Context) error {
	if c != nil {
		c.Run(ctx)
	}
	return nil
}

// AddStatus adds the pair's state to a readiness detail under "tls"; for
// nil, "plaintext". A pair on disk that does not load does not make a
// server unready: the one in effect still serves.
func (c *Certificate) AddStatus(detail map[string]any) {
	if c == nil {
		detail["tls"] = "plaintext"
		return
	}
	detail["tls"] = c.Status()
}
