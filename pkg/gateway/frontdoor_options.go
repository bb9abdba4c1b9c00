package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/serve"
)

// FrontDoor is how the gateway meets its clients: where it listens and the
// bounds that guard the process against them. Its durations are wall-clock
// time, never scaled by TimeScale: they guard against real clients.
type FrontDoor struct {
	Port int
	// BindAddress is the address the port listens on: loopback unless told
	// otherwise, so a gateway is never open to the network by accident.
	BindAddress string

	// ReadHeaderTimeout bounds a request's headers, BodyReadTimeout its body
	// from the end of the headers, IdleTimeout a keep-alive connection
	// between requests; ShutdownGrace is how long requests in flight may
	// finish after SIGTERM.
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	IdleTimeout       time.Duration
	ShutdownGrace     time.Duration
	// MaxConnections caps open client connections and MaxConcurrentRequests
	// the inference requests in flight; the excess is answered at once (503
	// and 429, with Retry-After) rather than queued.
	MaxConnections        int
	MaxConcurrentRequests int
	// MaxBodyBytes bounds a request body (413 beyond); MaxBufferedBytes is the
	// memory budget of every request body buffered at once (with its decoded
	// prompt): a body that does not fit in what is left gets 503 with
	// Retry-After.
	MaxBodyBytes     int64
	MaxBufferedBytes int64
	// MaxHeaderBytes bounds a request's headers (431 beyond).
	MaxHeaderBytes int
	// TrustedCIDRs are the client sources whose reserved headers (x-gateway-*,
	// x-igw-*: routing, priority, debug) are kept; every other client's are
	// removed. AllowDebugHeader lets trusted clients ask for x-igw-debug.
	TrustedCIDRs     []string
	AllowDebugHeader bool

	// trusted is TrustedCIDRs parsed, set by complete.
	trusted []netip.Prefix
}

// DefaultFrontDoor returns the front door's defaults.
func DefaultFrontDoor() FrontDoor {
	return FrontDoor{
		Port:                  8080,
		BindAddress:           "127.0.0.1",
		ReadHeaderTimeout:     10 * time.Second,
		BodyReadTimeout:       30 * time.Second,
		IdleTimeout:           120 * time.Second,
		ShutdownGrace:         30 * time.Second,
		MaxConnections:        8192,
		MaxConcurrentRequests: 4096,
		MaxBodyBytes:          64 << 20,
		MaxBufferedBytes:      1 << 30,
		MaxHeaderBytes:        64 << 10,
	}
}

// AddFlags registers the front door's flags on fs.
func (f *FrontDoor) AddFlags(fs *pflag.FlagSet) {
	f.listen().AddFlags(fs)
	fs.DurationVar(&f.ReadHeaderTimeout, "read-header-timeout", f.ReadHeaderTimeout, "Bound on reading a request's headers (wall clock).")
	fs.DurationVar(&f.BodyReadTimeout, "body-read-timeout", f.BodyReadTimeout, "Bound on reading a request's body after its headers; a slower upload gets 408 (wall clock).")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", f.IdleTimeout, "How long a keep-alive connection may wait for its next request (wall clock).")
	fs.DurationVar(&f.ShutdownGrace, "shutdown-grace", f.ShutdownGrace, "After SIGTERM, how long requests in flight (streams included) may finish before they are cut (wall clock).")
	fs.IntVar(&f.MaxConnections, "max-connections", f.MaxConnections, "Open client connections at most; a connection beyond gets 503 with Retry-After and is closed.")
	fs.IntVar(&f.MaxConcurrentRequests, "max-concurrent-requests", f.MaxConcurrentRequests, "Inference requests in flight at most; one beyond gets 429 with Retry-After.")
	fs.Int64Var(&f.MaxBufferedBytes, "max-buffered-bytes", f.MaxBufferedBytes, "Memory budget of the request bodies buffered at once, each counted twice (the body and its decoded prompt); a body that does not fit gets 503 with Retry-After. At least twice --max-body-bytes.")
	fs.IntVar(&f.MaxHeaderBytes, "max-header-bytes", f.MaxHeaderBytes, "Largest request header block; larger ones get 431.")
	fs.StringSliceVar(&f.TrustedCIDRs, "trusted-cidrs", f.TrustedCIDRs, "Client sources (CIDRs or addresses) whose x-gateway-* and x-igw-* headers are kept; every other client's are removed (default: none).")
	fs.BoolVar(&f.AllowDebugHeader, "allow-debug-header", f.AllowDebugHeader, "Answer x-igw-debug: 1 from trusted clients (--trusted-cidrs) with the pick's x-igw-score-breakdown.")
	fs.Int64Var(&f.MaxBodyBytes, "max-body-bytes", f.MaxBodyBytes, "Largest request body; larger ones get 413.")
}

// complete parses --trusted-cidrs.
func (f *FrontDoor) complete() error {
	trusted, err := parseTrusted(f.TrustedCIDRs)
	f.trusted = trusted
	return err
}

// validate reports every bad front-door option.
func (f *FrontDoor) validate() []error {
	errs := f.listen().Check()
	bad := func(msg string) { errs = append(errs, errors.New(msg)) }
	if f.BindAddress == "" {
		bad("--bind-address must name an address (0.0.0.0 or :: for every interface)")
	}
	if f.ReadHeaderTimeout <= 0 || f.BodyReadTimeout <= 0 || f.IdleTimeout <= 0 || f.ShutdownGrace < 0 {
		bad("--read-header-timeout, --body-read-timeout and --idle-timeout must be positive, --shutdown-grace not negative")
	}
	if f.MaxConnections <= 0 || f.MaxConcurrentRequests <= 0 || f.MaxHeaderBytes <= 0 || f.MaxBodyBytes <= 0 {
		bad("--max-connections, --max-concurrent-requests, --max-header-bytes and --max-body-bytes must be positive")
	}
	if f.MaxBodyBytes > 0 && f.MaxBufferedBytes < 2*f.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--max-buffered-bytes (%d) must be at least twice --max-body-bytes (%d): a body is counted with its decoded prompt",
			f.MaxBufferedBytes, f.MaxBodyBytes))
	}
	return errs
}

// parseTrusted reads --trusted-cidrs: prefixes, or bare addresses standing
// for themselves.
func parseTrusted(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--trusted-cidrs %q: want a CIDR (10.0.0.0/8) or an address", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// listen is the front door's port and address.
func (f *FrontDoor) listen() serve.Listen {
	return serve.Listen{Ports: []serve.PortFlag{{Name: "port", Value: &f.Port, Usage: "Port of the OpenAI API (0: any free port, printed at start)."}},
		BindAddress: &f.BindAddress, BindUsage: "Address to listen on (0.0.0.0 or :: for every interface)."}
}
