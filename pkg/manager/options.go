// Package manager runs the igw operator: it builds the controller-runtime manager
// and registers the reconcilers of package controllers.
package manager

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/internal/version"
)

// Options are the operator's flags, defaults and validation in one place.
type Options struct {
	MetricsAddr string
	// MetricsSecure serves the metrics over HTTPS, to callers whose token may
	// get /metrics (TokenReview and SubjectAccessReview, as kubebuilder does);
	// false serves plain HTTP, for tests and trusted networks.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate.
	MetricsCertDir   string
	ProbeAddr        string
	LeaderElect      bool
	LeaderElectionID string
	LeaderElectionNS string
	SyncPeriod       time.Duration
	WatchNamespace   string
	EPPImage         string
	BBRImage         string
	// GlobalPickerImage is the global picker's (cmd/igw-global), unless a GlobalInferenceGateway names one.
	GlobalPickerImage       string
	MaxConcurrentReconciles int
	// ExtensionServerAddr is where the Envoy Gateway extension server listens; "" or "0" turns it off.
	ExtensionServerAddr string
	// ExtensionServerTLS is the extension server's serving certificate (none: plaintext).
	ExtensionServerTLS servingtls.Files
	// ExtensionHookBound is how long Envoy Gateway may take to call the
	// extension hook after a config's children change before the config's
	// ExtensionHookActive condition turns False; 0 turns the condition off.
	ExtensionHookBound time.Duration
	// GlobalPickerStatus reads a global picker's GET /status; nil (the
	// default, no flag): over HTTP by the picker Service's cluster DNS name.
	// Tests and out-of-cluster runs set another.
	GlobalPickerStatus controllers.PickerStatusReader
}

// NewOptions returns the defaults. The EPP and BBR images are those of the
// operator's own release (internal/version), so the three do not drift apart.
func NewOptions() *Options {
	return &Options{
		MetricsAddr:             ":8443",
		MetricsSecure:           true,
		ProbeAddr:               ":8081",
		LeaderElectionID:        "igw-operator.igw.dev",
		SyncPeriod:              10 * time.Hour,
		EPPImage:                "ghcr.io/igw-dev/igw-epp:" + version.Version,
		BBRImage:                "ghcr.io/igw-dev/igw-bbr:" + version.Version,
		GlobalPickerImage:       "ghcr.io/igw-dev/igw-global:" + version.Version,
		MaxConcurrentReconciles: 4,
		ExtensionServerAddr:     ":5005",
		ExtensionHookBound:      2 * time.Minute,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address of the Prometheus metrics endpoint; 0 turns it off.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve the metrics over HTTPS to callers authorized to get /metrics (a bearer token checked with TokenReview and SubjectAccessReview); false serves plain HTTP.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with tls.crt and tls.key for the HTTPS metrics endpoint; a self-signed certificate when empty.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", o.LeaderElectionNS, "Namespace of the Lease; the pod's namespace when empty.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "How often every object is reconciled even without changes.")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "Reconcile objects of this namespace only; all namespaces when empty.")
	fs.StringVar(&o.EPPImage, "epp-image", o.EPPImage, "Image of the endpoint picker, unless a config or route names one.")
	fs.StringVar(&o.BBRImage, "bbr-image", o.BBRImage, "Image of the body-based router, unless a config names one.")
	fs.StringVar(&o.GlobalPickerImage, "global-picker-image", o.GlobalPickerImage, "Image of the global picker (igw-global), unless a GlobalInferenceGateway names one.")
	fs.StringVar(&o.ExtensionServerAddr, "extension-server-bind-address", o.ExtensionServerAddr, "Address of the Envoy Gateway extension server (PostTranslateModify hook); 0 turns it off.")
	o.ExtensionServerTLS.AddFlags(fs, "the Envoy Gateway extension server (--extension-server-bind-address)")
	fs.DurationVar(&o.ExtensionHookBound, "extension-hook-bound", o.ExtensionHookBound, "How long Envoy Gateway may take to call the extension hook after a config's children change before the config's ExtensionHookActive condition turns False; 0 turns the condition off.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Reconciles that may run at once per kind.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.ExtensionServerTLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.SyncPeriod < time.Minute {
		errs = append(errs, fmt.Errorf("--sync-period must be at least 1m, got %s", o.SyncPeriod))
	}
	if o.EPPImage == "" || o.BBRImage == "" || o.GlobalPickerImage == "" {
		errs = append(errs, errors.New("--epp-image, --bbr-image and --global-picker-image must not be empty"))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.MaxConcurrentReconciles))
	}
	if o.ExtensionHookBound != 0 && o.ExtensionHookBound < 10*time.Second {
		errs = append(errs, fmt.Errorf("--extension-hook-bound must be 0 (off) or at least 10s, since Envoy Gateway takes seconds to translate a change; got %s", o.ExtensionHookBound))
	}
	return errors.Join(errs...)
}
