package manager

import (
	"context"
	"fmt"
	"log/slog"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	igwv1alpha1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/pkg/egext"
	"github.com/igw-dev/igw/pkg/render"
)

// NewScheme returns the scheme with every kind the operator reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, igwv1alpha1.AddToScheme,
		gwapiv1.Install, gwapiv1beta1.Install, infv1.Install, egv1a1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Operator is the controller-runtime manager with igw's reconcilers registered.
type Operator struct {
	ctrl.Manager
	// Reconcilers are exposed so that tests can drive a reconcile directly.
	Reconcilers *controllers.Reconcilers
	// Hook records Envoy Gateway's calls of the extension server; nil when the server is off.
	Hook *egext.Liveness
}

// New builds the operator without starting it.
func New(cfg *rest.Config, o *Options) (*Operator, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	// Managed fields are large and the operator never reads them: it compares
	// against what it applied through its own annotation.
	cacheOpts := cache.Options{SyncPeriod: &o.SyncPeriod, DefaultTransform: cache.TransformStripManagedFields()}
	if o.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNS,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	copts := controllers.Options{
		Images:                  render.Images{EPP: o.EPPImage, BBR: o.BBRImage, Global: o.GlobalPickerImage},
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		PickerStatus:            o.GlobalPickerStatus,
	}
	var hook *egext.Liveness
	if o.ExtensionServerAddr != "" && o.ExtensionServerAddr != "0" {
		if hook, err = egext.NewLiveness(ctrlmetrics.Registry); err != nil {
			return nil, fmt.Errorf("registering the extension server's metrics: %w", err)
		}
		cert, err := servingtls.LoadIfSet(o.ExtensionServerTLS, slog.Default())
		if err != nil {
			return nil, fmt.Errorf("the extension server's certificate: %w", err)
		}
		if err := mgr.Add(egext.Runnable{Addr: o.ExtensionServerAddr, Liveness: hook, TLS: cert}); err != nil {
			return nil, err
		}
		if o.ExtensionHookBound > 0 {
			copts.Hook, copts.HookBound = hook, o.ExtensionHookBound
		}
	}
	recs, err := controllers.Setup(context.Background(), mgr, copts)
	if err != nil {
		return nil, fmt.Errorf("setting up the reconcilers: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return &Operator{Manager: mgr, Reconcilers: recs, Hook: hook}, nil
}

// Run starts the operator and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	op, err := New(cfg, o)
	if err != nil {
		return err
	}
	return op.Start(ctx)
}

// metricsOptions serves the metrics over authenticated HTTPS, or plain HTTP
// when o.MetricsSecure is false.
func metricsOptions(o *Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing, m.CertDir = true, o.MetricsCertDir
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}
