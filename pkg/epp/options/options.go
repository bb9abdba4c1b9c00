// Package options is the endpoint picker's command line.
package options

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/wire"
)

// Options configure one picker process.
type Options struct {
	GRPCPort    int
	HealthPort  int
	MetricsPort int
	// BindAddress is the address every port listens on ("" for all interfaces).
	BindAddress string
	// TLS is the ext_proc port's serving certificate (none: plaintext).
	TLS servingtls.Files

	ConfigFile         string
	ConfigPollInterval time.Duration

	PoolName      string
	PoolNamespace string
	Kubeconfig    string
	EndpointsFile string

	Telemetry

	MaxBodyBytes int64
	Seed         uint64

	// LeaderElect runs the picker active-passive: replicas elect a leader
	// through a coordination.k8s.io Lease, only the leader reports ready and
	// answers ext_proc, and standbys keep their endpoints and telemetry warm.
	// Several active replicas would each see only their share of a
	// conversation's turns, so prefix affinity would fall to about 1/N.
	LeaderElect bool
	// LeaseName and LeaseNamespace name the Lease (defaults: <pool>-epp in
	// the pool's namespace, which is what the operator's Role allows).
	LeaseName      string
	LeaseNamespace string
	// Identity is this replica's name in the Lease (default: the host name,
	// which is the Pod's name in a cluster, plus a random suffix so that two
	// processes on one host never both believe they hold the lease).
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal it
	// saw before taking over: the failover time when a leader dies without
	// releasing the lease. RenewDeadline is how long the leader keeps
	// retrying a renewal before it steps down; RetryPeriod is the interval
	// between attempts, and so the failover time after a clean release.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// GlobalSummaryTokenFile turns on the summary the global tier's hub reads
	// (GET /igw/v1/global-summary on GlobalSummaryPort), accepting the bearer
	// tokens in this file (one a line, mounted from a Secret); "" keeps it off.
	GlobalSummaryTokenFile string
	GlobalSummaryPort      int
	// GlobalSummaryModel is the pool's base model as clients name it; Cluster
	// and Region place this member for the hub.
	GlobalSummaryModel string
	Cluster            string
	Region             string
}

// leaseNameSuffix makes the default Lease name from the pool's name.
const leaseNameSuffix = "-epp"

// DefaultLeaseName is the Lease a picker of pool elects its leader through
// unless --leader-elect-lease-name says otherwise.
func DefaultLeaseName(pool string) string { return pool + leaseNameSuffix }

// New returns the defaults.
func New() *Options {
	return &Options{
		GRPCPort: 9002, HealthPort: 9003, MetricsPort: 9090,
		ConfigPollInterval: 250 * time.Millisecond,
		Telemetry:          DefaultTelemetry(),
		MaxBodyBytes:       64 << 20,
		// client-go's and kube-controller-manager's defaults: a dead leader
		// is replaced within 15 s, a released lease within about 2 s.
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,

		GlobalSummaryPort: 9007,
	}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.listen().AddFlags(fs)
	o.TLS.AddFlags(fs, "the ext_proc port (--grpc-port)")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Scheduling configuration file (YAML); reloaded on change. Empty: the built-in default.")
	fs.DurationVar(&o.ConfigPollInterval, "config-poll-interval", o.ConfigPollInterval, "How often the configuration and endpoints files are re-read.")
	fs.StringVar(&o.PoolName, "pool-name", o.PoolName, "InferencePool whose Pods are the endpoints.")
	fs.StringVar(&o.PoolNamespace, "pool-namespace", o.PoolNamespace, "Namespace of the InferencePool (default: $POD_NAMESPACE, else \"default\").")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig file (default: in-cluster configuration).")
	fs.StringVar(&o.EndpointsFile, "endpoints-file", o.EndpointsFile, "YAML list of {address, port, labels}: endpoints without a cluster; reloaded on change.")
	o.Telemetry.AddFlags(fs)
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "Largest request body buffered for scheduling; larger ones get 413.")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the tie-breaking random source.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run active-passive: elect a leader through a Lease; only the leader reports ready and serves ext_proc, standbys keep endpoints and telemetry warm. Needs --pool-name.")
	fs.StringVar(&o.LeaseName, "leader-elect-lease-name", o.LeaseName, "Name of the leader election Lease (default: <pool-name>-epp).")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-lease-namespace", o.LeaseNamespace, "Namespace of the leader election Lease (default: the pool's namespace).")
	fs.StringVar(&o.Identity, "leader-elect-identity", o.Identity, "This replica's identity in the Lease (default: host name plus a random suffix).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long standbys wait after the leader's last renewal before taking over (whole seconds).")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader retries a renewal before stepping down to standby.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "Interval between attempts to acquire or renew the Lease.")
	fs.StringVar(&o.GlobalSummaryTokenFile, "global-summary-token-file", o.GlobalSummaryTokenFile, "Serve this pool's summary to the global tier's hub (GET "+wire.GlobalSummaryPath+" on --global-summary-port), to requests bearing a token of this file (one a line, from a Secret; re-read on change). Empty: not served.")
	fs.IntVar(&o.GlobalSummaryPort, "global-summary-port", o.GlobalSummaryPort, "Port of the global tier's summary (with --global-summary-token-file).")
	fs.StringVar(&o.GlobalSummaryModel, "global-summary-model", o.GlobalSummaryModel, "The pool's base model as clients name it, for the summary (required with --global-summary-token-file).")
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "This member cluster's name, for the summary (required with --global-summary-token-file).")
	fs.StringVar(&o.Region, "region", o.Region, "This member cluster's region, for the summary.")
}

// listen is what the EPP listens on.
func (o *Options) listen() serve.Listen {
	return serve.ExtProcListen(&o.GRPCPort, &o.HealthPort, &o.MetricsPort, &o.BindAddress)
}

// GlobalSummary says whether the global tier's summary is served.
func (o *Options) GlobalSummary() bool { return o.GlobalSummaryTokenFile != "" }

// Complete fills defaults that depend on other options or the environment.
func (o *Options) Complete() {
	o.PoolNamespace = source.PoolNamespace(o.PoolNamespace)
	o.Telemetry.Complete()
	if o.LeaderElect {
		if o.LeaseName == "" && o.PoolName != "" {
			o.LeaseName = DefaultLeaseName(o.PoolName)
		}
		if o.LeaseNamespace == "" {
			o.LeaseNamespace = o.PoolNamespace
		}
		if o.Identity == "" {
			o.Identity = defaultIdentity()
		}
	}
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "epp"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// Validate rejects inconsistent options.
func (o *Options) Validate() error {
	if (o.PoolName == "") == (o.EndpointsFile == "") {
		return fmt.Errorf("exactly one of --pool-name and --endpoints-file is required")
	}
	var summaryPort []serve.Port
	if o.GlobalSummary() {
		summaryPort = append(summaryPort, serve.Port{Flag: "--global-summary-port", Port: o.GlobalSummaryPort})
	}
	if errs := o.listen().Check(summaryPort...); len(errs) > 0 {
		return errs[0]
	}
	if err := o.TLS.Validate(); err != nil {
		return err
	}
	if o.GlobalSummary() && (o.GlobalSummaryModel == "" || o.Cluster == "") {
		return fmt.Errorf("--global-summary-token-file needs --global-summary-model (the pool's model) and --cluster (this member's name)")
	}
	if err := o.Telemetry.Validate(); err != nil {
		return err
	}
	switch {
	case o.ConfigPollInterval <= 0:
		return fmt.Errorf("--config-poll-interval must be positive")
	case o.MaxBodyBytes <= 0:
		return fmt.Errorf("--max-body-bytes must be positive")
	}
	if o.LeaderElect {
		return o.validateLeaderElection()
	}
	return nil
}

// validateLeaderElection holds the Lease timings to what client-go's elector
// needs, with the flag names in the messages rather than its field names.
func (o *Options) validateLeaderElection() error {
	const jitter = 1.2 // leaderelection.JitterFactor: retries come up to 20% late
	switch {
	case o.EndpointsFile != "":
		return fmt.Errorf("--leader-elect needs an InferencePool source (--pool-name): with --endpoints-file there is no API server to hold the Lease")
	case o.LeaseName == "" || o.LeaseNamespace == "":
		return fmt.Errorf("--leader-elect needs a Lease name and namespace")
	case o.Identity == "":
		return fmt.Errorf("--leader-elect-identity must not be empty")
	case o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0:
		return fmt.Errorf("--leader-elect-lease-duration must be a whole number of seconds, at least 1s (a Lease stores seconds), got %s", o.LeaseDuration)
	case o.RenewDeadline <= 0 || o.RenewDeadline >= o.LeaseDuration:
		// The leader must give up before a standby may take over, or both serve.
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be positive and shorter than --leader-elect-lease-duration (%s)", o.RenewDeadline, o.LeaseDuration)
	case o.RetryPeriod <= 0 || float64(o.RenewDeadline) <= jitter*float64(o.RetryPeriod):
		// At least one renewal attempt must fit in the deadline.
		return fmt.Errorf("--leader-elect-retry-period (%s) must be positive and shorter than --leader-elect-renew-deadline / 1.2 (%s / 1.2)", o.RetryPeriod, o.RenewDeadline)
	}
	return nil
}
