package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/serve"
	eppoptions "github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/frontdoor"
	"github.com/igw-dev/igw/pkg/wire"
)

// Options configure one gateway process.
type Options struct {
	Port int
	// BindAddress is the address the port listens on: loopback unless told
	// otherwise, so a gateway is never open to the network by accident.
	BindAddress string
	// Options are the front door's bounds against clients (wall-clock time,
	// never scaled by TimeScale).
	frontdoor.Options
	// AllowDebugHeader lets trusted clients (TrustedCIDRs) ask for
	// x-igw-debug.
	AllowDebugHeader bool

	// ConfigFile maps models to pools (Config). Without it, one pool comes
	// from EndpointsFile (or the InferencePool PoolNamespace/PoolName),
	// ServedModelNames, Adapters and EPPConfig.
	ConfigFile    string
	EndpointsFile string
	PoolNamespace string
	PoolName      string
	// Kubeconfig reaches the API server of pools that follow an
	// InferencePool (empty: in-cluster).
	Kubeconfig       string
	ServedModelNames []string
	// Adapters are "adapter=base-model" pairs.
	Adapters  []string
	EPPConfig string

	// Policy is every pool's default policy: igw, or one of Policies.
	Policy string
	// Policies are the policies pools may run (nil: igw alone).
	Policies *Registry

	ConfigPollInterval time.Duration
	// Telemetry is how each pool's picker reads its endpoints (the EPP's
	// flags); the model lists are read for the igw policy only.
	eppoptions.Telemetry
	Seed uint64
	// RequestTimeout bounds a whole proxied request (0: none); DialTimeout a
	// connection attempt to a model server, after which the next fallback is tried.
	RequestTimeout time.Duration
	DialTimeout    time.Duration
	// FirstByteTimeout is how long a streamed request waits for its pod's
	// first byte before it is retried on another pod (0: never); a
	// non-streamed answer comes whole, so only RequestTimeout bounds it.
	FirstByteTimeout time.Duration
	// TimeScale makes the gateway's clock run this many times faster than the
	// wall clock, to match simulators run with --speedup; every duration
	// option of routing is in the gateway's time (the front door's are not).
	TimeScale float64

	// GlobalSummaryTokenFile turns on the member summary the global tier's
	// hub reads (GET wire.GlobalSummaryPath on Port), for requests bearing a
	// token of this file; Cluster and Region name the gateway's cluster there.
	GlobalSummaryTokenFile string
	Cluster                string
	Region                 string

	// Resolved is the pool configuration, set by Complete.
	Resolved *Config
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Port:               8080,
		BindAddress:        "127.0.0.1",
		Options:            frontdoor.Defaults(),
		Policy:             PolicyIGW,
		ConfigPollInterval: 250 * time.Millisecond,
		Telemetry:          eppoptions.DefaultTelemetry(),
		DialTimeout:        2 * time.Second,
		FirstByteTimeout:   30 * time.Second,
		TimeScale:          1,
	}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.listen().AddFlags(fs)
	o.Options.AddFlags(fs)
	fs.BoolVar(&o.AllowDebugHeader, "allow-debug-header", o.AllowDebugHeader, "Answer x-igw-debug: 1 from trusted clients (--trusted-cidrs) with the pick's x-igw-score-breakdown.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Gateway configuration (YAML): pools of endpoints and the models and adapters each serves.")
	fs.StringVar(&o.EndpointsFile, "endpoints-file", o.EndpointsFile, "Without --config: the one pool's endpoints (the EPP's YAML list of {address, port, labels}); reloaded on change.")
	fs.StringVar(&o.PoolName, "pool-name", o.PoolName, "Without --config, instead of --endpoints-file: the InferencePool whose ready Pods are the one pool's endpoints, followed through the API server; the last endpoints seen keep serving while the API server is unreachable.")
	fs.StringVar(&o.PoolNamespace, "pool-namespace", o.PoolNamespace, "Namespace of --pool-name (default: $POD_NAMESPACE, else \"default\").")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the API server that pools following an InferencePool read (default: in-cluster, the pod's service account).")
	fs.StringSliceVar(&o.ServedModelNames, "served-model-name", o.ServedModelNames, "Without --config: model names the pool serves (empty: every model).")
	fs.StringSliceVar(&o.Adapters, "adapter", o.Adapters, "Without --config: LoRA adapters the pool serves, as adapter=base-model.")
	fs.StringVar(&o.EPPConfig, "epp-config", o.EPPConfig, "Without --config: the pool's EPP scheduling configuration (default: the built-in); reloaded on change.")
	fs.StringVar(&o.Policy, "policy", o.Policy, "Every pool's default routing policy: "+strings.Join(o.Policies.Names(), ", ")+".")
	fs.DurationVar(&o.ConfigPollInterval, "config-poll-interval", o.ConfigPollInterval, "How often endpoints and EPP configuration files are re-read.")
	o.Telemetry.AddFlags(fs)
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the pickers' random choices.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "Bound on one proxied request, response included (0: none).")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Bound on connecting to a model server before trying the next fallback.")
	fs.DurationVar(&o.FirstByteTimeout, "first-byte-timeout", o.FirstByteTimeout, "How long a streamed request waits for its model server's first byte before it is retried once on another server (0: no limit); the last server tried is never cut.")
	fs.StringVar(&o.GlobalSummaryTokenFile, "global-summary-token-file", o.GlobalSummaryTokenFile, "Serve this gateway's member summary to the global tier's hub (GET "+wire.GlobalSummaryPath+" on --port), to requests bearing a token of this file (one a line; re-read on change). Empty: not served.")
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "The cluster's name in the member summary (required with --global-summary-token-file).")
	fs.StringVar(&o.Region, "region", o.Region, "The cluster's region in the member summary.")
	fs.Float64Var(&o.TimeScale, "time-scale", o.TimeScale, "Run the gateway's clock this many times faster than the wall clock (benchmarks against modelsim --speedup); routing durations are in the gateway's time, the front door's timeouts in wall-clock time.")
}

// Complete fills defaults and resolves the pool configuration.
func (o *Options) Complete() error {
	o.Telemetry.Complete()
	if err := o.Options.Complete(); err != nil {
		return err
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
	if o.PoolName != "" {
		pc.InferencePool = &PoolRef{Namespace: source.PoolNamespace(o.PoolNamespace), Name: o.PoolName}
	}
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
	if n := countSet(o.ConfigFile, o.EndpointsFile, o.PoolName); n != 1 {
		bad("exactly one of --config, --endpoints-file and --pool-name is required")
	}
	if o.ConfigFile != "" && (len(o.ServedModelNames) > 0 || len(o.Adapters) > 0 || o.EPPConfig != "" || o.PoolNamespace != "") {
		bad("--served-model-name, --adapter, --epp-config and --pool-namespace describe the pool of --endpoints-file or --pool-name; with --config, set them in the file")
	}
	if !o.Policies.Known(o.Policy) {
		bad("--policy must be one of %s, got %q", strings.Join(o.Policies.Names(), ", "), o.Policy)
	}
	errs = append(errs, o.listen().Check()...)
	if o.BindAddress == "" {
		bad("--bind-address must name an address (0.0.0.0 or :: for every interface)")
	}
	errs = append(errs, o.Options.Validate()...)
	if err := o.Telemetry.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case o.ConfigPollInterval <= 0:
		bad("--config-poll-interval must be positive")
	case o.RequestTimeout < 0 || o.DialTimeout <= 0 || o.FirstByteTimeout < 0:
		bad("--request-timeout and --first-byte-timeout must not be negative, --dial-timeout must be positive")
	case !(o.TimeScale > 0):
		bad("--time-scale must be positive")
	}
	if o.GlobalSummaryTokenFile != "" && o.Cluster == "" {
		bad("--cluster is required with --global-summary-token-file: the summary names its cluster")
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

func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// listen is the gateway's port and address.
func (o *Options) listen() serve.Listen {
	return serve.Listen{Ports: []serve.PortFlag{{Name: "port", Value: &o.Port, Usage: "Port of the OpenAI API (0: any free port, printed at start)."}},
		BindAddress: &o.BindAddress, BindUsage: "Address to listen on (0.0.0.0 or :: for every interface)."}
}
