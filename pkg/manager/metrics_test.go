package manager_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/manager"
)

// TestMetricsNeedAToken: with --metrics-secure the operator answers /metrics
// over HTTPS only to a token bound to config/rbac's metrics-reader ClusterRole:
// 401 without a token, 403 for a token without the role.
func TestMetricsNeedAToken(t *testing.T) {
	env := testenv.StartFor(t, "token checks need the control plane", testenv.Options{})
	addr := servetest.FreeAddr(t)
	op, err := manager.New(env.Config, &manager.Options{MetricsAddr: addr, MetricsSecure: true, MetricsCertDir: t.TempDir(),
		ProbeAddr: "0", SyncPeriod: time.Hour, EPPImage: "epp:test", BBRImage: "bbr:test", MaxConcurrentReconciles: 1,
		ExtensionServerAddr: "0"})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Serve(t, "operator", func(ctx context.Context, ready chan<- struct{}) error {
		close(ready)
		return op.Start(ctx)
	})

	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "default"
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reader := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, reader); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, stranger := token("prometheus"), token("stranger")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The certificate is self-signed, as in the ServiceMonitor's tlsConfig.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	servetest.WaitFor(t, "the HTTPS metrics endpoint", time.Minute, func() bool { return get("") != 0 })
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := get(stranger); code != http.StatusForbidden {
		t.Errorf("a token without metrics-reader: %d, want 403", code)
	}
	// The binding predates this token's first request, so no cached denial delays it.
	servetest.WaitFor(t, "a metrics-reader token to be let in", 30*time.Second, func() bool { return get(prometheus) == http.StatusOK })
	plain, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Error("the secure endpoint serves metrics over plain HTTP")
		}
	}
}
