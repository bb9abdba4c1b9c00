package hub

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/pkg/frontdoor"
)

// Options configure one hub process: flags, defaults and validation in one
// place (cmd/igw-global is their thin main).
type Options struct {
	// ConfigFile is the hub's configuration (Config), required.
	ConfigFile string
	// GRPCPort serves ext_proc; HTTPPort the standalone front (0: off);
	// MetricsPort /metrics, /healthz, /readyz and /status.
	GRPCPort    int
	HTTPPort    int
	MetricsPort int
	// BindAddress is the address every port listens on ("" for all interfaces).
	BindAddress string
	// Region overrides the configuration's region (the hub's own).
	Region   string
	LogLevel string
	// Seed makes the picker's tie-breaks and slow-start draws reproducible.
	Seed uint64
	// DialTimeout bounds the front's connection to a member gateway;
	// RequestTimeout a whole proxied request (0: none).
	DialTimeout    time.Duration
	RequestTimeout time.Duration
	// Options are the standalone front's door: its bounds against clients
	// and whose reserved headers (x-igw-client-region among them) it keeps.
	// ShutdownGrace and MaxBodyBytes serve the ext_proc service as well.
	frontdoor.Options

	// Resolved is the configuration file, read by Complete.
	Resolved *Config
	// level is LogLevel parsed.
	level slog.Level
	// completeErr is what Complete could not do, reported by Validate.
	completeErr error
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{ConfigFile: "/etc/igw-global/config.yaml", GRPCPort: 9002, MetricsPort: 9090, LogLevel: "info",
		DialTimeout: 2 * time.Second, Options: frontdoor.Defaults()}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.listen().AddFlags(fs)
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The hub's configuration (YAML): region, members, models, pipeline or policy, health.")
	fs.StringVar(&o.Region, "region", o.Region, "The hub's own region, a request's origin without x-igw-client-region (default: the configuration's).")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error.")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the picker's random choices.")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Standalone front: bound on connecting to a member gateway before the retry on another.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "Standalone front: bound on one proxied request, response included (0: none).")
	o.Options.AddFlags(fs)
}

// Complete reads the configuration file and applies --region.
func (o *Options) Complete() {
	o.completeErr = nil
	if err := o.Options.Complete(); err != nil {
		o.completeErr = err
		return
	}
	if err := o.level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		o.completeErr = fmt.Errorf("--log-level %q: want debug, info, warn or error", o.LogLevel)
		return
	}
	if o.ConfigFile == "" {
		return
	}
	c, err := LoadConfig(o.ConfigFile)
	if err != nil {
		o.completeErr = err
		return
	}
	if o.Region != "" {
		c.Region = o.Region
	}
	o.Resolved = c
}

// Validate reports every problem with the options; call it after Complete.
func (o *Options) Validate() error {
	var errs []error
	if o.ConfigFile == "" {
		errs = append(errs, errors.New("--config is required"))
	}
	if o.completeErr != nil {
		errs = append(errs, o.completeErr)
	}
	errs = append(errs, o.listen().Check()...)
	if o.DialTimeout <= 0 || o.RequestTimeout < 0 {
		errs = append(errs, errors.New("--dial-timeout must be positive, --request-timeout not negative"))
	}
	errs = append(errs, o.Options.Validate()...)
	if len(errs) == 0 && o.Resolved == nil {
		errs = append(errs, errors.New("options are not completed"))
	}
	return errors.Join(errs...)
}

// Level is the log level --log-level names.
func (o *Options) Level() slog.Level { return o.level }

// listen is what the hub listens on.
func (o *Options) listen() serve.Listen {
	return serve.Listen{Ports: []serve.PortFlag{
		{Name: "grpc-port", Value: &o.GRPCPort, Usage: "Port of the ext_proc gRPC service (Envoy's global route)."},
		{Name: "http-port", Value: &o.HTTPPort, Usage: "Port of the standalone OpenAI front that proxies to the picked member itself (0: off)."},
		{Name: "metrics-port", Value: &o.MetricsPort, Usage: "Port of /metrics, /healthz, /readyz and /status (the members' state as JSON)."},
	}, BindAddress: &o.BindAddress}
}
