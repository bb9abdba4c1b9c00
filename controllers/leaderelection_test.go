package controllers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/render"
)

// pickerArgs and pickerRole are what the operator applied for a route's picker.
func pickerArgs(ns, name string) []string {
	var d appsv1.Deployment
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute(name).EPP}, &d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0].Args
}

func pickerRole(ns, name string) *rbacv1.Role {
	var r rbacv1.Role
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute(name).EPP}, &r)).To(Succeed())
	return &r
}

// leaseRules are a Role's rules on Leases, as "verbs names" strings.
func leaseRules(r *rbacv1.Role) []string {
	var out []string
	for _, rule := range r.Rules {
		if slices.Contains(rule.APIGroups, render.GroupCoordination) {
			Expect(rule.Resources).To(Equal([]string{"leases"}))
			out = append(out, strings.Join(rule.Verbs, ",")+" "+strings.Join(rule.ResourceNames, ","))
		}
	}
	return out
}

// pickerPods are the names of the Pods of a route's picker, in order.
func pickerPods(ns, name string) []string {
	var d appsv1.Deployment
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute(name).EPP}, &d)).To(Succeed())
	pods, err := testenv.DeploymentPods(ctx, k8s, &d)
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// setReplicas sets a route's picker replicas (nil: the default).
func setReplicas(ns, name string, n *int32) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mr := getRoute(ns, name)
		if n == nil {
			mr.Spec.EPP = nil
		} else {
			mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: n}}
		}
		return k8s.Update(ctx, mr)
	})).To(Succeed())
}

// checkLeaderElection runs in the "Two ModelRoutes" container, where qwen's
// picker has two replicas and llama's one.
func checkLeaderElection() {
	qwenLease := render.NamesForRoute("qwen").EPP
	By("qwen's two pickers elect a leader through their Lease, which their Role lets them get and update by name and create")
	Expect(pickerArgs(ns, "qwen")).To(ContainElements("--leader-elect", "--leader-elect-lease-name="+qwenLease))
	Expect(leaseRules(pickerRole(ns, "qwen"))).To(ConsistOf("get,update "+qwenLease, "create "))
	By("llama's single picker neither elects nor may touch Leases")
	Expect(pickerArgs(ns, "llama")).NotTo(ContainElement(HavePrefix("--leader-elect")))
	Expect(leaseRules(pickerRole(ns, "llama"))).To(BeEmpty())

	By("the operator's shipped ClusterRole holds what that Role grants, so the API server lets it write the Role")
	canGrant(pickerRole(ns, "qwen"))

	By("one available replica of two, the leader, is a working picker: Ready, not Degraded")
	// A standby's readiness probe fails by design: the deployment controller
	// then counts one replica of two available.
	pods := pickerPods(ns, "qwen")
	Expect(pods).To(HaveLen(2))
	standby := pods[1]
	Expect(testenv.SetReadinessProbe(ctx, k8s, ns, standby, false)).To(Succeed())
	Expect(testenv.WaitForPodReady(ctx, k8s, ns, standby, false)).To(Succeed())
	Eventually(func() string {
		var d appsv1.Deployment
		_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: qwenLease}, &d)
		return fmt.Sprintf("%d updated, %d ready, %d available", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}, eventually, poll).Should(Equal("2 updated, 1 ready, 1 available"))
	Eventually(func() string {
		c := getRoute(ns, "qwen").Status.Conditions
		return condition(c, igwv1.ConditionReady) + " " + condition(c, igwv1.ConditionDegraded)
	}, eventually, poll).Should(Equal("True/Ready False/" + igwv1.ReasonAsExpected))
	st := getRoute(ns, "qwen").Status
	Expect(st.Rollout).To(Equal(igwv1.RolloutAvailable))
	Expect(meta.FindStatusCondition(st.Conditions, igwv1.ConditionReady).Message).To(ContainSubstring("leader available"))

	By("scaling llama's picker to two renders leader election and the lease rules; back to one removes them")
	setReplicas(ns, "llama", ptr[int32](2))
	llamaLease := render.NamesForRoute("llama").EPP
	Eventually(func() []string { return pickerArgs(ns, "llama") }, eventually, poll).Should(ContainElement("--leader-elect-lease-name=" + llamaLease))
	Eventually(func() []string { return leaseRules(pickerRole(ns, "llama")) }, eventually, poll).Should(ConsistOf("get,update "+llamaLease, "create "))
	setReplicas(ns, "llama", nil)
	Eventually(func() []string { return pickerArgs(ns, "llama") }, eventually, poll).ShouldNot(ContainElement(HavePrefix("--leader-elect")))
	Eventually(func() []string { return leaseRules(pickerRole(ns, "llama")) }, eventually, poll).Should(BeEmpty())
	passReadinessProbes(ns, render.NamesForRoute("llama").EPP)
	Eventually(routeCondition(ns, "llama", igwv1.ConditionDegraded), eventually, poll).Should(Equal("False/" + igwv1.ReasonAsExpected))
}

// canGrant binds the ClusterRole the operator ships (config/rbac/role.yaml)
// to a service account, and, as that account, writes a copy of role: RBAC's
// escalation check refuses a Role that grants more than its writer holds.
// A Role with one verb more on Leases must be refused, or the check did not run.
func canGrant(role *rbacv1.Role) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var shipped rbacv1.ClusterRole
	Expect(yaml.UnmarshalStrict(data, &shipped)).To(Succeed())
	const sa = "operator-rbac-check"
	shipped.ObjectMeta = metav1.ObjectMeta{Name: sa}
	Expect(k8s.Create(ctx, &shipped)).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}})).To(Succeed())
	DeferCleanup(func() {
		Expect(k8s.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}})).To(Succeed())
		Expect(k8s.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}})).To(Succeed())
	})
	cfg := rest.CopyConfig(env.Config)
	// The account need not exist: impersonation names it.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	as, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	grant := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac-check-copy"}, Rules: role.Rules}
	// The binding reaches the authorizer's cache shortly after it is created.
	Eventually(func() error { return as.Create(ctx, grant) }, eventually, poll).Should(Succeed())
	Expect(k8s.Delete(ctx, grant)).To(Succeed())

	more := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac-check-more"},
		Rules: append(slices.Clone(role.Rules), rbacv1.PolicyRule{APIGroups: []string{render.GroupCoordination}, Resources: []string{"leases"}, Verbs: []string{"delete"}})}
	err = as.Create(ctx, more)
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a Role granting more than the ClusterRole holds was not refused: %v", err)
}
