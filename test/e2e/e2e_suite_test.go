// Package e2e is igw's end-to-end suite: the real local control plane
// (internal/testenv), the operator's manager running in process with the
// permissions config/rbac grants it, an InferenceGatewayConfig and two
// ModelRoutes, Pods whose IPs are loopback addresses where simulators
// (cmd/modelsim) listen, the body-based router and one endpoint picker per
// model run from the Deployments and ConfigMaps the operator rendered, and an
// HTTP front that plays Envoy Gateway from the operator's HTTPRoutes and
// policies. Requests come from the official openai-go client.
//
// The workload machinery is real: kube-controller-manager's Deployment,
// ReplicaSet and garbage-collection controllers, kube-scheduler, and kwok
// playing a node (Pods running with loopback IPs, ready as their readiness
// probes say: testenv.SetReadinessProbe). What has no real component here is
// played by the suite: the container runtime (a simulator on a model Pod's
// IP; a Deployment's pod run in process with its ConfigMap volumes, its
// readiness probe) and Envoy Gateway (the Gateway's Programmed condition and
// its data plane, in envoy_test.go).
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/manager"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "igw end to end")
}

const (
	// operatorNamespace and operatorServiceAccount are who the operator runs as.
	operatorNamespace      = "igw-system"
	operatorServiceAccount = "controller-manager"

	eventually = 60 * time.Second // generous: two shared cores
	poll       = 50 * time.Millisecond
)

var (
	env    *testenv.Env
	k8s    client.Client // the suite's own client, as cluster administrator
	scheme *runtime.Scheme
	ctx    context.Context
	cancel context.CancelFunc
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	// kwok gives Pods IPs from a loopback range no other package uses: the
	// simulators listen there while other packages' tests run.
	env, err = testenv.Start(testenv.Options{ExtraCRDDirs: testenv.ExternalCRDDirs,
		Controllers: testenv.WorkloadControllers, Nodes: &testenv.Nodes{PodCIDR: "127.0.93.0/24"}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	scheme, err = manager.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(func() { cancel() })
	Expect(k8s.Create(ctx, testenv.NewNode("node-0", nil))).To(Succeed())

	By("running the operator with the ClusterRole it ships (config/rbac/role.yaml)")
	op, err := manager.New(operatorConfig(), &manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", SyncPeriod: 10 * time.Hour,
		EPPImage: "ghcr.io/igw-dev/igw-epp:e2e", BBRImage: "ghcr.io/igw-dev/igw-bbr:e2e", MaxConcurrentReconciles: 2,
	})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(op.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() { cancel(); <-done })
})

// operatorConfig binds the operator's ClusterRole to its service account and
// returns a configuration that acts as that account, so that a permission the
// role lacks fails here as it would in a cluster.
func operatorConfig() *rest.Config {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.UnmarshalStrict(data, &role)).To(Succeed())
	Expect(k8s.Create(ctx, &role)).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "igw-operator-e2e"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: operatorNamespace, Name: operatorServiceAccount}},
	})).To(Succeed())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccountUser(operatorNamespace, operatorServiceAccount)}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// serviceAccountUser is the user name a service account's token authenticates as.
func serviceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}
