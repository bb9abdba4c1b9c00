package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/wire"
)

// Options configure one gateway process.
type Options struct {
	Port int
	// BindAddress is the address the port listens on ("" for all interfaces).
	BindAddress string

	// ConfigFile maps models to pools (Config). Without it, one pool comes
	// from EndpointsFile, ServedModelNames, Adapters and EPPConfig.
	ConfigFile       string
	EndpointsFile    string
	ServedModelNames []string
	// Adapters are "adapter=base-model" pairs.
	Adapters  []string
	EPPConfig string

	// Policy is every pool's default policy: igw, or one of Policies.
	Policy string
	// Policies are the policies pools may run (nil: igw alone).
	Policies *Registry

	ConfigPollInterval time.Duration
	ScrapeInterval     time.Duration
	ScrapeTimeout      time.Duration
	// ModelsInterval is how often the igw policy reads each endpoint's model
	// list (served models and registered LoRA adapters); 0 turns it off.
	ModelsInterval   time.Duration
	ModelsTimeout    time.Duration
	MetricsPath      string
	MetricsStaleness time.Duration
	StalePolicy      string
	MaxBodyBytes     int64
	Seed             uint64
	// RequestTimeout bounds a whole proxied request (0: none); DialTimeout a
	// connection attempt to a model server, after which the next fallback is tried.
	RequestTimeout time.Duration
	DialTimeout    time.Duration
	// TimeScale makes the gateway's clock run this many times faster than the
	// wall clock, to match simulators run with --speedup; every duration
	// option is in the gateway's time.
	TimeScale float64

	// Resolved is the pool configuration, set by Complete.
	Resolved *Config
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Port:               8080,
		Policy:             PolicyIGW,
		ConfigPollInterval: 250 * time.Millisecond,
		ScrapeInterval:     50 * time.Millisecond,
		ModelsInterval:     5 * time.Second,
		ModelsTimeout:      2 * time.Second,
		MetricsPath:        wire.MetricsPath,
		MetricsStaleness:   200 * time.Millisecond,
		StalePolicy:        string(director.StaleSaturated),
		MaxBodyBytes:       64 << 20,
		DialTimeout:        2 * time.Second,
		TimeScale:          1,
	}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Port, "port", o.Port, "Port of the OpenAI API (0: any free port, printed at start).")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address to listen on (empty: all interfaces).")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Gateway configuration (YAML): pools of endpoints and the models and adapters each serves.")
	fs.StringVar(&o.EndpointsFile, "endpoints-file", o.EndpointsFile, "Without --config: the one pool's endpoints (the EPP's YAML list of {address, port, labels}); reloaded on change.")
	fs.StringSliceVar(&o.ServedModelNames, "served-model-name", o.ServedModelNames, "Without --config: model names the pool serves (empty: every model).")
	fs.StringSliceVar(&o.Adapters, "adapter", o.Adapters, "Without --config: LoRA adapters the pool serves, as adapter=base-model.")
	fs.StringVar(&o.EPPConfig, "epp-config", o.EPPConfig, "Without --config: the pool's EPP scheduling configuration (default: the built-in); reloaded on change.")
	fs.StringVar(&o.Policy, "policy", o.Policy, "Every pool's default routing policy: "+strings.Join(o.Policies.Names(), ", ")+".")
	fs.DurationVar(&o.ConfigPollInterval, "config-poll-interval", o.ConfigPollInterval, "How often endpoints and EPP configuration files are re-read.")
	fs.DurationVar(&o.ScrapeInterval, "scrape-interval", o.ScrapeInterval, "How often each endpoint's metrics are scraped.")
	fs.DurationVar(&o.ScrapeTimeout, "scrape-timeout", o.ScrapeTimeout, "Timeout of one scrape (default: the scrape interval).")
	fs.DurationVar(&o.ModelsInterval, "models-interval", o.ModelsInterval, "How often the igw policy reads each endpoint's model list (GET /v1/models), so adapter requests avoid pods that lack the adapter; 0 turns it off.")
	fs.DurationVar(&o.ModelsTimeout, "models-timeout", o.ModelsTimeout, "Timeout of one model list read.")
	fs.StringVar(&o.MetricsPath, "metrics-path", o.MetricsPath, "Path of the model servers' Prometheus metrics.")
	fs.DurationVar(&o.MetricsStaleness, "metrics-staleness", o.MetricsStaleness, "Age after which an endpoint's telemetry is stale.")
	fs.StringVar(&o.StalePolicy, "stale-policy", o.StalePolicy, "What a stale endpoint is: saturated or filter.")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "Largest request body; larger ones get 413.")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the pickers' random choices.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "Bound on one proxied request, response included (0: none).")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Bound on connecting to a model server before trying the next fallback.")
	fs.Float64Var(&o.TimeScale, "time-scale", o.TimeScale, "Run the gateway's clock this many times faster than the wall clock (benchmarks against modelsim --speedup); durations are in the gateway's time.")
}

// Complete fills defaults and resolves the pool configuration.
func (o *Options) Complete() error {
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = o.ScrapeInterval
	}
	if o.ConfigFile != "" {
		c, err := LoadConfig(o.ConfigFile)
		if err != nil {
			return err
		}
		o.Resolved = c
		return nil
	}
	pc := PoolConfig{Name: "default", Models: o.ServedModelNames, EndpointsFile: o.EndpointsFile, EPPConfig: o.EPPConfig}
	for _, a := range o.Adapters {
		name, base, ok := strings.Cut(a, "=")
		if !ok || name == "" || base == "" {
			return fmt.Errorf("--adapter %q: want adapter=base-model", a)
		}
		if pc.Adapters == nil {
			pc.Adapters = map[string]string{}
		}
		pc.Adapters[name] = base
	}
	o.Resolved = &Config{Pools: []PoolConfig{pc}}
	return nil
}

// Validate rejects inconsistent options; call it after Complete.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if (o.ConfigFile == "") == (o.EndpointsFile == "") {
		bad("exactly one of --config and --endpoints-file is required")
	}
	if o.ConfigFile != "" && (len(o.ServedModelNames) > 0 || len(o.Adapters) > 0 || o.EPPConfig != "") {
		bad("--served-model-name, --adapter and --epp-config describe the pool of --endpoints-file; with --config, set them in the file")
	}
	if o.Port < 0 || o.Port > 65535 {
		bad("--port %d is out of range", o.Port)
	}
	if !o.Policies.Known(o.Policy) {
		bad("--policy must be one of %s, got %q", strings.Join(o.Policies.Names(), ", "), o.Policy)
	}
	switch {
	case o.ScrapeInterval <= 0:
		bad("--scrape-interval must be positive")
	case o.ScrapeTimeout <= 0:
		bad("--scrape-timeout must be positive")
	case o.ModelsInterval < 0:
		bad("--models-interval must not be negative")
	case o.ModelsInterval > 0 && o.ModelsTimeout <= 0:
		bad("--models-timeout must be positive")
	case o.MetricsStaleness < 0:
		bad("--metrics-staleness must not be negative")
	case o.ConfigPollInterval <= 0:
		bad("--config-poll-interval must be positive")
	case o.MaxBodyBytes <= 0:
		bad("--max-body-bytes must be positive")
	case o.RequestTimeout < 0 || o.DialTimeout <= 0:
		bad("--request-timeout must not be negative and --dial-timeout must be positive")
	case !(o.TimeScale > 0):
		bad("--time-scale must be positive")
	}
	if p := director.StalePolicy(o.StalePolicy); p != director.StaleSaturated && p != director.StaleFilter {
		bad("--stale-policy must be saturated or filter, got %q", o.StalePolicy)
	}
	if o.Resolved == nil {
		bad("options are not completed")
	} else {
		if err := o.Resolved.Validate(); err != nil && o.ConfigFile == "" {
			errs = append(errs, err)
		}
		for _, p := range o.Resolved.Pools {
			if p.Policy != "" && !o.Policies.Known(p.Policy) {
				bad("pool %q: unknown policy %q (known: %s)", p.Name, p.Policy, strings.Join(o.Policies.Names(), ", "))
			}
		}
	}
	return errors.Join(errs...)
}
