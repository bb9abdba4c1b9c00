package controllers_test

import (
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// scaleRoutes is how many ModelRoutes the scale run provisions.
const scaleRoutes = 100

// writesByResource groups write requests by verb and resource ("PATCH deployments").
func writesByResource(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		method, path, _ := strings.Cut(k, " ")
		segs := strings.Split(strings.Trim(path, "/"), "/")
		resource := segs[len(segs)-1]
		for i, s := range segs {
			if s == "namespaces" && i+2 < len(segs) {
				resource = segs[i+2]
				if i+4 < len(segs) {
					resource += "/" + segs[i+4]
				}
				break
			}
		}
		out[method+" "+resource] += d
	}
	return out
}

var _ = Describe("At scale", Ordered, func() {
	const scale = "scale"

	// The namespace is not held (heldNamespace): each picker's Pod is Ready
	// as soon as kwok runs it, so each route is Ready once the deployment and
	// replicaset controllers have rolled its picker out.
	It(fmt.Sprintf("brings %d ModelRoutes to Ready, and reports the time and the API writes it took", scaleRoutes), func() {
		namespace(scale)
		gateway(scale, "inference-gateway")
		programGateway(scale, "inference-gateway")
		config(scale, "igw", nil)
		var pods []string
		for i := 0; i < scaleRoutes; i++ {
			name := fmt.Sprintf("model-%03d", i)
			modelPod(scale, name+"-0", map[string]string{"app": name}, "")
			pods = append(pods, name+"-0")
		}
		setPodsReady(scale, pods...)
		quiesce()

		n0, paths0 := writes.snapshot()
		start := time.Now()
		for i := 0; i < scaleRoutes; i++ {
			name := fmt.Sprintf("model-%03d", i)
			route(scale, name, "igw", []igwv1.ModelName{igwv1.ModelName(name)}, nil)
		}
		Eventually(func() int {
			var routes igwv1.ModelRouteList
			Expect(k8s.List(ctx, &routes, client.InNamespace(scale))).To(Succeed())
			ready := 0
			for _, mr := range routes.Items {
				if meta.IsStatusConditionTrue(mr.Status.Conditions, igwv1.ConditionReady) {
					ready++
				}
			}
			return ready
		}, 5*time.Minute, 250*time.Millisecond).Should(Equal(scaleRoutes))
		elapsed := time.Since(start)
		n1, paths1 := writes.snapshot()
		quiesce()
		n2, paths2 := writes.snapshot()

		byResource := writesByResource(paths0, paths2)
		keys := make([]string, 0, len(byResource))
		for k := range byResource {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lines []string
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("  %-45s %5d", k, byResource[k]))
		}
		report := fmt.Sprintf("%d ModelRoutes Ready in %s; operator API writes: %d until all Ready, %d once settled (%.1f per route)\n%s",
			scaleRoutes, elapsed.Round(10*time.Millisecond), n1-n0, n2-n0, float64(n2-n0)/scaleRoutes, strings.Join(lines, "\n"))
		AddReportEntry("scale", report)
		GinkgoWriter.Println(report)
		_ = paths1
	})
})
