package controllers_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoyproxy/gateway/proto/extension"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/egext"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/render"
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "igw operator on a real API server")
}

var testImages = render.Images{EPP: "ghcr.io/igw-dev/igw-epp:test", BBR: "ghcr.io/igw-dev/igw-bbr:test", Global: "ghcr.io/igw-dev/igw-global:test"}

// hookBound is the operator's --extension-hook-bound in the suite: short, so
// that a config whose hook is never called turns False within the spec.
const hookBound = 4 * time.Second

var (
	// hook is the operator's extension server; envoyGatewayCalls says whether
	// playEnvoyGateway calls it.
	hook              egext.Server
	envoyGatewayCalls atomic.Bool
	env               *testenv.Env
	k8s               client.Client // the test's own client, not counted
	scheme            *runtime.Scheme
	recs              *controllers.Reconcilers
	writes            = &writeCounter{} // every write of the operator
	ownWrites         = &writeCounter{} // those of the test's own Reconcile calls (reconcileCtx)
	ctx               context.Context
	cancel            context.CancelFunc
)

// writeCounter counts the operator's requests that can change state: the proof
// that a reconcile of an unchanged object writes nothing.
type writeCounter struct {
	mu     sync.Mutex
	n      int
	byPath map[string]int
}

// countWrites counts the writes through rt in writes, and in ownWrites those
// made for a test's own Reconcile call; it records the watches established
// through it in watches.
func countWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			writes.add(req)
			if req.Context().Value(ownReconcile{}) != nil {
				ownWrites.add(req)
			}
		}
		resp, err := rt.RoundTrip(req)
		if w := req.URL.Query().Get("watch"); req.Method == http.MethodGet && (w == "true" || w == "1") && err == nil && resp.StatusCode == http.StatusOK {
			watches.established(req.URL.Path)
		}
		return resp, err
	})
}

// watchLog holds when the operator's last watch of each resource (its URL
// path) was established.
type watchLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// watches are the operator's.
var watches = &watchLog{}

func (w *watchLog) established(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	w.last[path] = time.Now()
}

// notSince lists the resources whose last watch was established before t.
func (w *watchLog) notSince(t time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for path, at := range w.last {
		if at.Before(t) {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out
}

// ownReconcile marks the context of a test's own Reconcile calls
// (reconcileCtx): the writes they cause are told apart from those of the
// manager's reconciles, which requeue on timers (a status refresh, the end of
// the extension-hook wait) and may run at any moment of a test, later on a
// loaded machine than the quiet second quiesce waits for.
type ownReconcile struct{}

// reconcileCtx is the context of a test's own Reconcile call.
func reconcileCtx() context.Context { return context.WithValue(ctx, ownReconcile{}, true) }

func (w *writeCounter) add(req *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.byPath == nil {
		w.byPath = map[string]int{}
	}
	w.byPath[req.Method+" "+req.URL.Path]++
}

// snapshot returns the count and a copy of the per-path counts.
func (w *writeCounter) snapshot() (int, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	paths := make(map[string]int, len(w.byPath))
	for k, v := range w.byPath {
		paths[k] = v
	}
	return w.n, paths
}

// since lists the writes after an earlier snapshot, for failure messages.
func (w *writeCounter) since(before map[string]int) string {
	_, now := w.snapshot()
	var out []string
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	// The workload machinery is the real one: kube-controller-manager's
	// deployment and replicaset controllers run the operator's Deployments'
	// Pods, its garbage collector deletes the children of deleted owners,
	// kube-scheduler places Pods and kwok plays the node (IPs, readiness).
	// The specs step a route through the states of its rollout (picker
	// unavailable, one picker of two available, then Ready) through the
	// pickers' readiness probes: in the namespaces they create with
	// heldNamespace, every Pod starts with its probe failing, and a spec lets
	// a Deployment's probes pass (passReadinessProbes) or one fail again.
	env, err = testenv.Start(testenv.Options{ExtraCRDDirs: testenv.ExternalCRDDirs,
		Controllers: testenv.WorkloadControllers,
		Nodes:       &testenv.Nodes{PodCIDR: "127.0.94.0/24"}})
	Expect(err).NotTo(HaveOccurred())
	scheme, err = manager.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(context.Background(), testenv.NewNode("node-0", nil))).To(Succeed())

	counted := rest.CopyConfig(env.Config)
	counted.WrapTransport = countWrites
	// The test drives status changes quickly; the defaults would throttle 100 routes.
	counted.QPS, counted.Burst = 200, 400
	op, err := manager.New(counted, &manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", SyncPeriod: 10 * time.Hour,
		EPPImage: testImages.EPP, BBRImage: testImages.BBR, GlobalPickerImage: testImages.Global, MaxConcurrentReconciles: 4,
		ExtensionServerAddr: "127.0.0.1:0", ExtensionHookBound: hookBound,
		// The global pickers' GET /status, served over HTTP by the test (the
		// pickers' Service names do not resolve outside a cluster).
		GlobalPickerStatus: controllers.HTTPPickerStatus{URL: pickerStatus.url},
	})
	Expect(err).NotTo(HaveOccurred())
	recs = op.Reconcilers
	hook = egext.Server{Liveness: op.Hook}
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(op.Start(ctx)).To(Succeed())
	}()
	envoyGatewayCalls.Store(true)
	go playEnvoyGateway(ctx)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	pickerStatus.close()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// playEnvoyGateway calls the operator's extension hook every 200 ms, as Envoy
// Gateway does after each translation, while envoyGatewayCalls is set (the
// default: every spec but the one about a silent hook runs with a live one).
func playEnvoyGateway(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if envoyGatewayCalls.Load() {
			_, _ = hook.PostTranslateModify(ctx, &extension.PostTranslateModifyRequest{})
		}
	}, 200*time.Millisecond)
}
