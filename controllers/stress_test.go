package controllers_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/pkg/render"
)

// The churn run: cross-namespace configs are deleted and recreated under the
// same names while other writers keep the API server busy, so that reconciles
// run from caches that lag behind. Nothing the operator places beside a
// Gateway has an owner reference, so whatever the cleanup misses stays forever.
const (
	churnCycles  = 200
	churnWorkers = 8 // configs cycling at once, each under its own name
	churnWriters = 8 // goroutines writing unrelated policies meanwhile
)

var _ = Describe("Cross-namespace configs deleted and recreated under load", Ordered, func() {
	const team, gateways, noise = "churn", "churn-gateways", "churn-noise"

	It(fmt.Sprintf("leave no child beside the Gateway after %d delete/recreate cycles", churnCycles), func() {
		namespace(team)
		namespace(gateways)
		namespace(noise)
		gateway(gateways, "shared")
		fast := rest.CopyConfig(env.Config)
		fast.QPS, fast.Burst = 1000, 2000
		c, err := client.New(fast, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		stop := make(chan struct{})
		var load sync.WaitGroup
		var noiseWrites atomic.Int64
		for w := 0; w < churnWriters; w++ {
			load.Go(func() { writeNoise(c, noise, w, stop, &noiseWrites) })
		}
		// Touching the shared Gateway enqueues every config it serves, from the cache.
		load.Go(func() { touchGateway(c, gateways, "shared", stop, &noiseWrites) })

		start := time.Now()
		cycles := make(chan int, churnCycles)
		for i := 0; i < churnCycles; i++ {
			cycles <- i
		}
		close(cycles)
		var workers sync.WaitGroup
		for w := 0; w < churnWorkers; w++ {
			workers.Go(func() {
				defer GinkgoRecover()
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range cycles {
					churnCycle(c, rng, team, gateways, fmt.Sprintf("cfg-%d", w), i)
				}
			})
		}
		workers.Wait()
		elapsed := time.Since(start)
		close(stop)
		load.Wait()

		quiesce()
		// Beside the Gateway nothing may be left once the operator is quiet;
		// in the configs' namespace the garbage collector takes its time.
		left := func() []string { return childrenLeft(c, team, gateways) }
		Expect(left()).NotTo(ContainElement(ContainSubstring(" "+gateways+"/")), "children beside the Gateway whose config is gone")
		Eventually(left, 2*time.Minute, 200*time.Millisecond).Should(BeEmpty(), "children whose config is gone")
		Consistently(left, 3*time.Second, 200*time.Millisecond).Should(BeEmpty(), "children recreated after their config went")
		report := fmt.Sprintf("%d delete/recreate cycles of %d cross-namespace configs in %s beside %d unrelated writes; children left of %d kinds: %d",
			churnCycles, churnWorkers, elapsed.Round(100*time.Millisecond), noiseWrites.Load(), len(controllers.ConfigChildKinds), len(left()))
		AddReportEntry("churn", report)
		GinkgoWriter.Println(report)
	})
})

// churnCycle creates a config whose Gateway lives in another namespace and
// deletes it: as soon as the operator has set its finalizer (while the first
// reconcile is still applying), once its policy stands beside the Gateway, or
// a random moment after creation.
func churnCycle(c client.Client, rng *rand.Rand, team, gateways, name string, i int) {
	cfg := &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "shared", Namespace: gateways}}}}
	Eventually(func() error { return c.Create(ctx, cfg.DeepCopy()) }, eventually, poll).Should(Succeed())
	policy := types.NamespacedName{Namespace: gateways, Name: render.NamesForConfig(name).BBRPolicy}
	switch i % 3 {
	case 0:
		Eventually(func() []string {
			var live igwv1.InferenceGatewayConfig
			_ = c.Get(ctx, client.ObjectKeyFromObject(cfg), &live)
			return live.Finalizers
		}, eventually, 2*time.Millisecond).Should(ContainElement(controllers.FinalizerCrossNamespace))
	case 1:
		Eventually(func() error { return c.Get(ctx, policy, &egv1a1.EnvoyExtensionPolicy{}) }, eventually, poll).Should(Succeed())
	case 2:
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
	Expect(client.IgnoreNotFound(c.Delete(ctx, cfg))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cfg), &igwv1.InferenceGatewayConfig{}))
	}, eventually, poll).Should(BeTrue(), "config %s/%s (cycle %d) is not deleted", team, name, i)
}

// childrenLeft lists every child the operator wrote for a config of team, of
// every kind it writes: in team's namespace (the garbage collector's to
// delete once the config is gone) and beside the Gateway in gateways (the
// operator's own cleanup's).
func childrenLeft(c client.Client, team, gateways string) []string {
	var out []string
	for _, gvk := range controllers.ConfigChildKinds {
		for _, ns := range []string{team, gateways} {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			Expect(c.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{render.LabelManagedBy: render.ManagedByValue})).To(Succeed())
			for _, m := range l.Items {
				if ns == gateways && m.Labels[render.LabelConfigNamespace] != team {
					continue
				}
				out = append(out, fmt.Sprintf("%s %s/%s (config %s, created %s)", gvk.Kind, ns, m.Name, m.Labels[render.LabelConfig],
					m.CreationTimestamp.UTC().Format(time.RFC3339)))
			}
		}
	}
	return out
}

// writeNoise creates, updates and deletes EnvoyExtensionPolicies until stop
// closes: they keep the operator's informer of the kind it places beside the
// Gateway busy, so its cache lags behind the API server.
func writeNoise(c client.Client, namespace string, writer int, stop <-chan struct{}, writes *atomic.Int64) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		p := foreignPolicy(namespace, fmt.Sprintf("noise-%d-%d", writer, i%8))
		if c.Create(ctx, p) == nil {
			writes.Add(1)
		}
		p.Labels = map[string]string{"round": fmt.Sprint(i)}
		if c.Update(ctx, p) == nil {
			writes.Add(1)
		}
		if c.Delete(ctx, p) == nil {
			writes.Add(1)
		}
	}
}

// foreignPolicy is an EnvoyExtensionPolicy the operator did not render.
func foreignPolicy(namespace, name string) *egv1a1.EnvoyExtensionPolicy {
	port := gwapiv1.PortNumber(9000)
	return &egv1a1.EnvoyExtensionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: egv1a1.EnvoyExtensionPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Group: gwapiv1.GroupName, Kind: "Gateway", Name: "none"}}}},
			ExtProc: []egv1a1.ExtProc{{BackendCluster: egv1a1.BackendCluster{BackendRefs: []egv1a1.BackendRef{{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: "noise", Port: &port}}}}}},
		}}
}

// touchGateway changes an annotation of a Gateway until stop closes.
func touchGateway(c client.Client, namespace, name string, stop <-chan struct{}, writes *atomic.Int64) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"churn":"%d"}}}`, i))
		obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if c.Patch(ctx, obj, patch) == nil {
			writes.Add(1)
		}
	}
}
