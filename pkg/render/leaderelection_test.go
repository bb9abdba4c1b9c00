package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	eppoptions "github.com/igw-dev/igw/pkg/epp/options"
)

// leaseRules are the Role's rules on Leases.
func leaseRules(r *rbacv1.Role) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, rule := range r.Rules {
		if slices.Contains(rule.APIGroups, GroupCoordination) || slices.Contains(rule.Resources, "leases") {
			out = append(out, rule)
		}
	}
	return out
}

// TestLeaderElectionOnlyWithSeveralReplicas: a picker Deployment of more than
// one replica (the route's count, else the config's) runs --leader-elect with
// a Lease its Role lets it get and update by name and create, is probed every
// second, rolls out without waiting for standbys to become ready, and
// spreads over nodes; the binary accepts the rendered arguments and elects
// through the very Lease the Role names. One replica renders none of it.
func TestLeaderElectionOnlyWithSeveralReplicas(t *testing.T) {
	for _, c := range []struct {
		name           string
		config, route  *int32
		leaderElection bool
	}{
		{"default", nil, nil, false},
		{"route: 2", nil, ptr[int32](2), true},
		{"config: 3", ptr[int32](3), nil, true},
		{"config 3, route 1", ptr[int32](3), ptr[int32](1), false},
		{"config 2, route 0", ptr[int32](2), ptr[int32](0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Spec.EPP.Replicas = c.config
			mr := testRoute("llama", "llama")
			if c.route != nil {
				mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: c.route}}
			}
			out, err := Route(RouteInput{Route: mr, Config: cfg, Images: testImages})
			if err != nil {
				t.Fatal(err)
			}
			name := out.Names.EPP
			d := deploymentOf(t, out.Objects, name)
			ctr := d.Spec.Template.Spec.Containers[0]
			rules := leaseRules(objectOf[*rbacv1.Role](t, out.Objects, name))
			elects := slices.Contains(ctr.Args, "--leader-elect")
			if elects != c.leaderElection {
				t.Fatalf("%d replicas: --leader-elect %v, want %v (args %q)", *d.Spec.Replicas, elects, c.leaderElection, ctr.Args)
			}

			if !c.leaderElection {
				if len(rules) != 0 {
					t.Errorf("a single picker's Role grants Leases: %v", rules)
				}
				if mu := d.Spec.Strategy.RollingUpdate.MaxUnavailable; mu.IntValue() != 0 {
					t.Errorf("a single picker may go unavailable in a rollout: %v", mu)
				}
				if d.Spec.Template.Spec.Affinity != nil || ctr.ReadinessProbe.PeriodSeconds != 5 {
					t.Errorf("single picker: affinity %v, probe period %d", d.Spec.Template.Spec.Affinity, ctr.ReadinessProbe.PeriodSeconds)
				}
				return
			}

			// The arguments are the binary's own flags, and name the Lease the Role grants.
			o := eppoptions.New()
			fs := pflag.NewFlagSet("epp", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(ctr.Args); err != nil {
				t.Fatalf("the picker rejects %q: %v", ctr.Args, err)
			}
			o.Complete()
			if err := o.Validate(); err != nil {
				t.Fatalf("the picker rejects %q: %v", ctr.Args, err)
			}
			if !o.LeaderElect || o.LeaseName != name || o.LeaseNamespace != mr.Namespace {
				t.Fatalf("the picker elects through %s/%s (%v), want %s/%s", o.LeaseNamespace, o.LeaseName, o.LeaderElect, mr.Namespace, name)
			}
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{o.LeaseName}, Verbs: []string{"get", "update"}},
				// RBAC cannot match a create by name: the request carries none.
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			}
			if !slices.EqualFunc(rules, want, func(a, b rbacv1.PolicyRule) bool {
				return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
					slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.Verbs, b.Verbs)
			}) {
				t.Errorf("lease rules %v, want %v", rules, want)
			}

			// Standbys are never ready: a rollout that waits for new pods to
			// be ready before removing old ones would never end.
			if mu := d.Spec.Strategy.RollingUpdate.MaxUnavailable; *mu != intstr.FromString("100%") {
				t.Errorf("maxUnavailable %v: the old leader could never be replaced", mu)
			}
			p := ctr.ReadinessProbe
			if p.GRPC == nil || p.GRPC.Port != EPPHealthPort || p.PeriodSeconds != 1 {
				t.Errorf("readiness probe %+v: want the gRPC health port (which reports leadership) every second", p)
			}
			aff := d.Spec.Template.Spec.Affinity
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
				aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
				t.Errorf("replicas not spread over nodes: %+v", aff)
			}
		})
	}
}

// TestLeaseNameFollowsHashedNames: a route name long enough to be hashed
// still gets a Lease name that fits and equals its Role's resourceNames.
func TestLeaseNameFollowsHashedNames(t *testing.T) {
	mr := testRoute(strings.Repeat("a-very-long-model-route-name-", 3), "m")
	mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: ptr[int32](2)}}
	out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	name := out.Names.EPP
	args := deploymentOf(t, out.Objects, name).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--leader-elect-lease-name="+name) || len(name) > 63 {
		t.Fatalf("lease %q, args %q", name, args)
	}
	if rules := leaseRules(objectOf[*rbacv1.Role](t, out.Objects, name)); len(rules) == 0 || !slices.Equal(rules[0].ResourceNames, []string{name}) {
		t.Fatalf("Role rules %v do not name the Lease %s", rules, name)
	}
	if eppoptions.DefaultLeaseName(mr.Name) == name {
		t.Fatal("the hashed name equals the picker's default: this test no longer checks the explicit flag")
	}
}
