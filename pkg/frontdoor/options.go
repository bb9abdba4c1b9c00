package frontdoor

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options are the front door's bounds. Its durations are wall-clock time
// (a gateway that runs its routing clock faster still guards against real
// clients).
type Options struct {
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
	// x-igw-*: routing, priority, region, debug) are kept; every other
	// client's are removed.
	TrustedCIDRs []string

	// trusted is TrustedCIDRs parsed, set by Complete.
	trusted []netip.Prefix
}

// Defaults returns the front door's defaults.
func Defaults() Options {
	return Options{
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
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", o.ReadHeaderTimeout, "Bound on reading a request's headers (wall clock).")
	fs.DurationVar(&o.BodyReadTimeout, "body-read-timeout", o.BodyReadTimeout, "Bound on reading a request's body after its headers; a slower upload gets 408 (wall clock).")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "How long a keep-alive connection may wait for its next request (wall clock).")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", o.ShutdownGrace, "After SIGTERM, how long requests in flight (streams included) may finish before they are cut (wall clock).")
	fs.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "Open client connections at most; a connection beyond gets 503 with Retry-After and is closed.")
	fs.IntVar(&o.MaxConcurrentRequests, "max-concurrent-requests", o.MaxConcurrentRequests, "Inference requests in flight at most; one beyond gets 429 with Retry-After.")
	fs.Int64Var(&o.MaxBufferedBytes, "max-buffered-bytes", o.MaxBufferedBytes, "Memory budget of the request bodies buffered at once, each counted twice (the body and its decoded prompt); a body that does not fit gets 503 with Retry-After. At least twice --max-body-bytes.")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", o.MaxHeaderBytes, "Largest request header block; larger ones get 431.")
	fs.StringSliceVar(&o.TrustedCIDRs, "trusted-cidrs", o.TrustedCIDRs, "Client sources (CIDRs or addresses) whose x-gateway-* and x-igw-* headers are kept; every other client's are removed (default: none).")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "Largest request body; larger ones get 413.")
}

// Complete parses --trusted-cidrs.
func (o *Options) Complete() error {
	trusted, err := parseTrusted(o.TrustedCIDRs)
	o.trusted = trusted
	return err
}

// Validate reports every bad front-door option.
func (o *Options) Validate() []error {
	var errs []error
	bad := func(msg string) { errs = append(errs, errors.New(msg)) }
	if o.ReadHeaderTimeout <= 0 || o.BodyReadTimeout <= 0 || o.IdleTimeout <= 0 || o.ShutdownGrace < 0 {
		bad("--read-header-timeout, --body-read-timeout and --idle-timeout must be positive, --shutdown-grace not negative")
	}
	if o.MaxConnections <= 0 || o.MaxConcurrentRequests <= 0 || o.MaxHeaderBytes <= 0 || o.MaxBodyBytes <= 0 {
		bad("--max-connections, --max-concurrent-requests, --max-header-bytes and --max-body-bytes must be positive")
	}
	if o.MaxBodyBytes > 0 && o.MaxBufferedBytes < 2*o.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--max-buffered-bytes (%d) must be at least twice --max-body-bytes (%d): a body is counted with its decoded prompt",
			o.MaxBufferedBytes, o.MaxBodyBytes))
	}
	return errs
}

// MemoryHeadroom is a server's memory besides buffered bodies: the runtime,
// connections, routing state, responses in flight.
const MemoryHeadroom = 256 << 20

// SetMemoryLimit makes the garbage collector hold the heap near the
// buffering budget plus headroom (unless GOMEMLIMIT says otherwise): the
// bodies of finished requests are garbage, and without a limit the heap may
// grow to twice what is live before they are collected.
func (o *Options) SetMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := o.MaxBufferedBytes + MemoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Info("memory limit set", "bytes", limit, "bufferBudget", o.MaxBufferedBytes)
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
