package source

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Kube follows one InferencePool and the Pods its selector matches, through a
// controller-runtime cache limited to the pool's namespace. Every ready Pod
// with an IP contributes one endpoint per target port, labelled with the Pod's
// labels.
type Kube struct {
	Config    *rest.Config
	Namespace string
	PoolName  string
	Store     Store
	Log       *slog.Logger

	synced atomic.Bool
}

// RESTConfig reaches the API server with a kubeconfig file, or, without
// one, as the pod's own service account (in-cluster).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}

// PoolNamespace is the namespace of a pool named without one: ns when set,
// else the pod's own ($POD_NAMESPACE, which the operator's Deployments set),
// else "default".
func PoolNamespace(ns string) string {
	return cmp.Or(ns, os.Getenv("POD_NAMESPACE"), "default")
}

// Synced reports whether the first full view of the pool was applied.
func (k *Kube) Synced() bool { return k.synced.Load() }

// Scheme holds the types the source reads.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := infv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Run watches until ctx ends.
func (k *Kube) Run(ctx context.Context) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c, err := cache.New(k.Config, cache.Options{Scheme: scheme,
		DefaultNamespaces: map[string]cache.Config{k.Namespace: {}}})
	if err != nil {
		return fmt.Errorf("endpoint source cache: %w", err)
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, obj := range []client.Object{&infv1.InferencePool{}, &corev1.Pod{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("endpoint source cache did not sync")
	}
	notify()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-changed:
			if err := k.sync(ctx, c); err != nil {
				k.log().Error("endpoint sync failed", "pool", k.PoolName, "error", err)
				continue
			}
			k.synced.Store(true)
		}
	}
}

func (k *Kube) sync(ctx context.Context, c client.Reader) error {
	var pool infv1.InferencePool
	if err := c.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.PoolName}, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			k.apply(nil)
			return nil
		}
		return err
	}
	sel := client.MatchingLabels{}
	for key, v := range pool.Spec.Selector.MatchLabels {
		sel[string(key)] = string(v)
	}
	var pods corev1.PodList
	if len(sel) > 0 {
		if err := c.List(ctx, &pods, client.InNamespace(k.Namespace), sel); err != nil {
			return err
		}
	}
	k.apply(Endpoints(&pool, pods.Items))
	return nil
}

func (k *Kube) apply(eps []datastore.Endpoint) {
	added, removed := k.Store.SetEndpoints(eps)
	if len(added)+len(removed) > 0 {
		k.log().Info("endpoints changed", "pool", k.PoolName, "added", added, "removed", removed, "total", len(eps))
	}
}

// Endpoints turns a pool and candidate Pods into endpoints: ready, running,
// not terminating, with an IP, one per target port.
func Endpoints(pool *infv1.InferencePool, pods []corev1.Pod) []datastore.Endpoint {
	var out []datastore.Endpoint
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning || !ready(p) {
			continue
		}
		for _, tp := range pool.Spec.TargetPorts {
			out = append(out, datastore.Endpoint{Address: p.Status.PodIP, Port: int(tp.Number), Labels: p.Labels})
		}
	}
	return out
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (k *Kube) log() *slog.Logger { return cmp.Or(k.Log, slog.Default()) }
