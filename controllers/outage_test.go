package controllers_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// apiServerOutage is how long the API server stays down: longer than the
// first back-offs of the operator's watches, so that they resume from a
// back-off rather than from one quick retry.
const apiServerOutage = 10 * time.Second

// afterOutage bounds the operator's return: the watches' back-off has grown
// during the outage, and the machine is loaded.
const afterOutage = 2 * time.Minute

var _ = Describe("The operator through an API-server outage", Ordered, Serial, func() {
	const team = "outage"

	childrenOfRoute := func(name string) func() error {
		return func() error {
			var mr igwv1.ModelRoute
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: name}, &mr); err != nil {
				return err
			}
			var cfg igwv1.InferenceGatewayConfig
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: mr.Spec.ConfigRef.Name}, &cfg); err != nil {
				return err
			}
			out, err := render.Route(render.RouteInput{Route: &mr, Config: &cfg, Images: testImages})
			if err != nil {
				return err
			}
			return allExist(childrenOf(out.Objects))
		}
	}

	It("resumes reconciling once the API server is back", func() {
		namespace(team)
		gateway(team, "inference-gateway")
		config(team, "igw", nil)
		route(team, "llama", "igw", []igwv1.ModelName{"llama"}, nil)
		Eventually(childrenOfRoute("llama"), eventually, poll).Should(Succeed())

		Expect(env.StopAPIServer()).To(Succeed())
		down := time.Now()
		watched := watches.notSince(down)
		Expect(watched).To(ContainElements("/api/v1/services", "/apis/apps/v1/deployments"), "the operator's watches")
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				Expect(env.StartAPIServer()).To(Succeed()) // the rest of the suite needs it
			}
		})
		time.Sleep(apiServerOutage) // the outage itself, not a wait for the operator
		Expect(env.StartAPIServer()).To(Succeed())
		restarted = true
		back := time.Now()

		By("a route created after the outage gets its children")
		route(team, "qwen", "igw", []igwv1.ModelName{"qwen"}, nil)
		Eventually(childrenOfRoute("qwen"), afterOutage, poll).Should(Succeed())
		By("a child deleted after the outage comes back (the child watches resumed)")
		picker := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: render.NamesForRoute("llama").EPP}, picker)).To(Succeed())
		Expect(k8s.Delete(ctx, picker)).To(Succeed())
		Eventually(func() bool {
			var d appsv1.Deployment
			err := k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: render.NamesForRoute("llama").EPP}, &d)
			return err == nil && d.UID != picker.UID
		}, afterOutage, poll).Should(BeTrue())
		reconciling := time.Since(back)
		// Each watch resumes after its own back-off, up to a minute after
		// the return: a spec after this one that needs the operator's cache
		// current (one counting the writes of a reconcile) must not run on a
		// watch still backing off.
		By("every watch of the operator is established again")
		Eventually(func() []string { return watches.notSince(down) }, afterOutage, poll).Should(BeEmpty())
		AddReportEntry("api-server outage", "down "+back.Sub(down).Round(time.Millisecond).String()+
			", reconciling again within "+reconciling.Round(time.Millisecond).String()+" of its return, its "+
			strconv.Itoa(len(watched))+" watches back within "+time.Since(back).Round(time.Millisecond).String())
	})
})
