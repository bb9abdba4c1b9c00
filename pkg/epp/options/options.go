// Package options is the endpoint picker's command line.
package options

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/wire"
)

// Options configure one picker process.
type Options struct {
	GRPCPort    int
	HealthPort  int
	MetricsPort int
	// BindAddress is the address every port listens on ("" for all interfaces).
	BindAddress string

	ConfigFile         string
	ConfigPollInterval time.Duration

	PoolName      string
	PoolNamespace string
	Kubeconfig    string
	EndpointsFile string

	ScrapeInterval   time.Duration
	ScrapeTimeout    time.Duration
	MetricsPath      string
	MetricsStaleness time.Duration
	StalePolicy      string

	// ModelsInterval is how often each endpoint's model list (GET /v1/models)
	// is read; 0 turns the reads off. ModelsTimeout bounds one read.
	ModelsInterval time.Duration
	ModelsTimeout  time.Duration

	MaxBodyBytes int64
	Seed         uint64
}

// New returns the defaults.
func New() *Options {
	return &Options{
		GRPCPort: 9002, HealthPort: 9003, MetricsPort: 9090,
		ConfigPollInterval: 250 * time.Millisecond,
		ScrapeInterval:     50 * time.Millisecond,
		MetricsPath:        wire.MetricsPath,
		MetricsStaleness:   200 * time.Millisecond,
		StalePolicy:        string(director.StaleSaturated),
		ModelsInterval:     5 * time.Second,
		ModelsTimeout:      2 * time.Second,
		MaxBodyBytes:       64 << 20,
	}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.GRPCPort, "grpc-port", o.GRPCPort, "Port of the ext_proc gRPC service.")
	fs.IntVar(&o.HealthPort, "health-port", o.HealthPort, "Port of the gRPC health service (grpc.health.v1).")
	fs.IntVar(&o.MetricsPort, "metrics-port", o.MetricsPort, "Port of /metrics, /healthz and /readyz over HTTP.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address to listen on (empty: all interfaces).")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Scheduling configuration file (YAML); reloaded on change. Empty: the built-in default.")
	fs.DurationVar(&o.ConfigPollInterval, "config-poll-interval", o.ConfigPollInterval, "How often the configuration and endpoints files are re-read.")
	fs.StringVar(&o.PoolName, "pool-name", o.PoolName, "InferencePool whose Pods are the endpoints.")
	fs.StringVar(&o.PoolNamespace, "pool-namespace", o.PoolNamespace, "Namespace of the InferencePool (default: $POD_NAMESPACE, else \"default\").")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig file (default: in-cluster configuration).")
	fs.StringVar(&o.EndpointsFile, "endpoints-file", o.EndpointsFile, "YAML list of {address, port, labels}: endpoints without a cluster; reloaded on change.")
	fs.DurationVar(&o.ScrapeInterval, "scrape-interval", o.ScrapeInterval, "How often each endpoint's metrics are scraped.")
	fs.DurationVar(&o.ScrapeTimeout, "scrape-timeout", o.ScrapeTimeout, "Timeout of one scrape (default: the scrape interval).")
	fs.StringVar(&o.MetricsPath, "metrics-path", o.MetricsPath, "Path of the model servers' Prometheus metrics (trtllm-serve: /prometheus/metrics).")
	fs.DurationVar(&o.MetricsStaleness, "metrics-staleness", o.MetricsStaleness, "Age after which an endpoint's telemetry is stale.")
	fs.StringVar(&o.StalePolicy, "stale-policy", o.StalePolicy, "What a stale endpoint is: saturated (kept, scored worst, sheddable) or filter (removed).")
	fs.DurationVar(&o.ModelsInterval, "models-interval", o.ModelsInterval, "How often each endpoint's model list (GET /v1/models: served models and registered LoRA adapters) is read; 0 turns it off.")
	fs.DurationVar(&o.ModelsTimeout, "models-timeout", o.ModelsTimeout, "Timeout of one model list read.")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "Largest request body buffered for scheduling; larger ones get 413.")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the tie-breaking random source.")
}

// Complete fills defaults that depend on other options or the environment.
func (o *Options) Complete() {
	if o.PoolNamespace == "" {
		o.PoolNamespace = os.Getenv("POD_NAMESPACE")
	}
	if o.PoolNamespace == "" {
		o.PoolNamespace = "default"
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = o.ScrapeInterval
	}
}

// Validate rejects inconsistent options.
func (o *Options) Validate() error {
	if (o.PoolName == "") == (o.EndpointsFile == "") {
		return fmt.Errorf("exactly one of --pool-name and --endpoints-file is required")
	}
	ports := map[int]string{}
	for name, p := range map[string]int{"--grpc-port": o.GRPCPort, "--health-port": o.HealthPort, "--metrics-port": o.MetricsPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("%s %d is out of range", name, p)
		}
		if other, dup := ports[p]; dup && p != 0 {
			return fmt.Errorf("%s and %s are both %d", name, other, p)
		}
		ports[p] = name
	}
	switch {
	case o.ScrapeInterval <= 0:
		return fmt.Errorf("--scrape-interval must be positive")
	case o.ScrapeTimeout <= 0:
		return fmt.Errorf("--scrape-timeout must be positive")
	case o.MetricsStaleness < 0:
		return fmt.Errorf("--metrics-staleness must not be negative")
	case o.ModelsInterval < 0:
		return fmt.Errorf("--models-interval must not be negative (0 turns the model list reads off)")
	case o.ModelsInterval > 0 && o.ModelsTimeout <= 0:
		return fmt.Errorf("--models-timeout must be positive")
	case o.ConfigPollInterval <= 0:
		return fmt.Errorf("--config-poll-interval must be positive")
	case o.MaxBodyBytes <= 0:
		return fmt.Errorf("--max-body-bytes must be positive")
	}
	if p := director.StalePolicy(o.StalePolicy); p != director.StaleSaturated && p != director.StaleFilter {
		return fmt.Errorf("--stale-policy must be saturated or filter, got %q", o.StalePolicy)
	}
	return nil
}
