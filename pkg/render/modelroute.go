package render

import (
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/wire"
)

// EPP configuration file inside the picker's pod.
const (
	EPPConfigKey       = "config.yaml"
	eppConfigMountPath = "/etc/igw/epp"
	eppConfigVolume    = "config"
	// maxMatchesPerRule is Gateway API's limit of matches in one HTTPRoute rule.
	maxMatchesPerRule = 64
)

// RouteInput is everything a ModelRoute's children depend on.
type RouteInput struct {
	Route  *igwv1.ModelRoute
	Config *igwv1.InferenceGatewayConfig
	Images Images
	// Observations of the selected pods, for auto-tuning.
	Observations Observations
	// RawConfig is the EPP configuration read from spec.scoring.configMapRef, when it is set.
	RawConfig []byte
}

// RouteOutput is a route's children and the facts its status reports.
type RouteOutput struct {
	// Objects in the order they are applied: a Deployment's ConfigMap and
	// ServiceAccount before it, the HTTPRoute before the policies that target it.
	Objects []client.Object
	Scoring igwv1.ScoringStatus
	Names   RouteNames
	Gateway GatewayTarget
}

// Route renders the children of a ModelRoute. It is a pure function of its input.
func Route(in RouteInput) (RouteOutput, error) {
	mr, cfg := in.Route, in.Config
	if mr == nil || cfg == nil {
		return RouteOutput{}, errors.New("render: route and config are required")
	}
	out := RouteOutput{Names: NamesForRoute(mr.Name), Gateway: ResolveGateway(cfg)}
	labels := RouteLabels(mr)
	m := func(name string) metav1.ObjectMeta { return meta(name, mr.Namespace, labels, mr, KindModelRoute) }

	var eppConfig []byte
	if mr.Spec.Scoring != nil && mr.Spec.Scoring.ConfigMapRef != nil {
		if len(in.RawConfig) == 0 {
			return RouteOutput{}, fmt.Errorf("render: scoring.configMapRef %s is set but its content is missing", mr.Spec.Scoring.ConfigMapRef.Name)
		}
		var err error
		if eppConfig, err = rawEPPConfig(mr, in.RawConfig); err != nil {
			return RouteOutput{}, err
		}
		out.Scoring = igwv1.ScoringStatus{Source: ScoringSourceConfigMap}
	} else {
		out.Scoring = ResolveScoring(cfg, mr, in.Observations)
		var err error
		if eppConfig, err = EPPConfig(mr, out.Scoring); err != nil {
			return RouteOutput{}, err
		}
	}

	n := out.Names
	out.Objects = append(out.Objects,
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: m(n.EPP)},
		eppRole(m(n.EPP), EPPLeaderElection(EPPReplicas(mr, cfg))),
		eppRoleBinding(m(n.EPP)),
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", KindConfigMap), ObjectMeta: m(n.EPP),
			Data: map[string]string{EPPConfigKey: string(eppConfig)}},
		eppDeployment(in, m(n.EPP)),
		eppService(mr, cfg, m(n.EPP)),
		inferencePool(mr, cfg, m(n.Pool), n),
	)
	if p := extProcTLSPolicy(cfg, m(n.EPP), n.EPP); p != nil {
		out.Objects = append(out.Objects, p)
	}
	if p := extProcNetworkPolicy(cfg, m(n.EPP), eppSelector(mr), []int32{EPPGRPCPort}, []int32{EPPHealthPort, EPPMetricsPort}); p != nil {
		out.Objects = append(out.Objects, p)
	}
	native := cfg.Spec.Gateway.Provider == igwv1.ProviderNative
	if !native {
		out.Objects = append(out.Objects, poolService(mr, m(n.PoolService)))
	}
	route, err := httpRoute(mr, m(n.HTTPRoute), out.Gateway, n, native)
	if err != nil {
		return RouteOutput{}, err
	}
	out.Objects = append(out.Objects, route)
	if !native {
		out.Objects = append(out.Objects,
			endpointOverridePolicy(m(n.TrafficPolicy), n.HTTPRoute),
			eppExtensionPolicy(m(n.EPPPolicy), n, EPPFailureMode(mr, cfg)),
		)
	}
	return out, nil
}

// eppSelector labels the picker's pods.
func eppSelector(mr *igwv1.ModelRoute) map[string]string {
	return map[string]string{LabelName: NameEPP, LabelInstance: LabelValue(mr.Name)}
}

// EPPReplicas is a route's picker replica count: the route's, else the config's, else 1.
func EPPReplicas(mr *igwv1.ModelRoute, cfg *igwv1.InferenceGatewayConfig) int32 {
	var over *int32
	if mr.Spec.EPP != nil {
		over = mr.Spec.EPP.Replicas
	}
	return firstInt32(1, over, cfg.Spec.EPP.Replicas)
}

// EPPLeaderElection reports whether a picker Deployment of this many replicas
// runs active-passive (--leader-elect): several active pickers would each see
// only their share of a conversation's turns, so its prefix would be found
// with probability about 1/N. One replica needs no Lease, and keeps the
// rendering (and the RBAC) it had before leader election existed.
func EPPLeaderElection(replicas int32) bool { return replicas > 1 }

// GroupCoordination is the API group of Leases.
const GroupCoordination = "coordination.k8s.io"

// eppRole lets the picker read, in its own namespace only, the pool it serves
// and its pods; with leader election, also hold its Lease (named as the
// Role): get and update that one Lease only. Create cannot be limited to a
// name (a create request's URL carries none, so RBAC's resourceNames never
// match it): it covers any Lease of the namespace, and is granted only when
// the picker elects a leader.
func eppRole(m metav1.ObjectMeta, leaderElection bool) *rbacv1.Role {
	read := []string{"get", "list", "watch"}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read},
		{APIGroups: []string{GroupInference}, Resources: []string{"inferencepools"}, Verbs: read},
	}
	if leaderElection {
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{GroupCoordination}, Resources: []string{"leases"}, ResourceNames: []string{m.Name}, Verbs: []string{"get", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{GroupCoordination}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		)
	}
	return &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: m, Rules: rules}
}

func eppRoleBinding(m metav1.ObjectMeta) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: m,
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: m.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: m.Name, Namespace: m.Namespace}}}
}

// EPPFailureMode is the route's failure mode, else the config's, else FailClose.
func EPPFailureMode(mr *igwv1.ModelRoute, cfg *igwv1.InferenceGatewayConfig) igwv1.FailureMode {
	if mr.Spec.EPP != nil && mr.Spec.EPP.FailureMode != "" {
		return mr.Spec.EPP.FailureMode
	}
	if cfg.Spec.EPP.FailureMode != "" {
		return cfg.Spec.EPP.FailureMode
	}
	return igwv1.FailClose
}

// eppDeployment runs the picker over the route's pool with the rendered
// configuration mounted from the ConfigMap. Nothing in the pod template depends
// on the configuration's content: the picker re-reads the file when the kubelet
// swaps it, so a weight change never restarts pods.
func eppDeployment(in RouteInput, m metav1.ObjectMeta) *appsv1.Deployment {
	mr, cfg := in.Route, in.Config
	var over igwv1.EPPOverrides
	if mr.Spec.EPP != nil {
		over = *mr.Spec.EPP
	}
	args := []string{
		"--grpc-port=" + strconv.Itoa(EPPGRPCPort),
		"--health-port=" + strconv.Itoa(EPPHealthPort),
		"--metrics-port=" + strconv.Itoa(EPPMetricsPort),
		"--pool-name=" + NamesForRoute(mr.Name).Pool,
		"--pool-namespace=" + mr.Namespace,
		"--config=" + eppConfigMountPath + "/" + EPPConfigKey,
	}
	if d := cfg.Spec.EPP.ScrapeInterval; d != nil {
		args = append(args, "--scrape-interval="+d.Duration.String())
	}
	if d := cfg.Spec.EPP.MetricsStaleness; d != nil {
		args = append(args, "--metrics-staleness="+d.Duration.String())
	}
	if mr.Spec.Engine == igwv1.EngineTRTLLM {
		args = append(args, "--metrics-path="+wire.TRTLLMMetricsPath)
	}
	replicas := EPPReplicas(mr, cfg)
	leaderElection := EPPLeaderElection(replicas)
	readiness := grpcProbe(EPPHealthPort)
	var strategy *appsv1.DeploymentStrategy
	var affinity *corev1.Affinity
	if leaderElection {
		// The Lease is named as the Deployment and its Role; the picker's
		// default (<pool>-epp) would match too, but only for names short
		// enough not to be hashed.
		args = append(args, "--leader-elect", "--leader-elect-lease-name="+m.Name)
		readiness, strategy, affinity = leaderReadiness(), activePassiveRollout(), spreadReplicas(eppSelector(mr))
	}
	c := corev1.Container{
		Name:  "epp",
		Image: firstString(over.Image, cfg.Spec.EPP.Image, in.Images.EPP),
		Args:  args,
		Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}},
		Ports: []corev1.ContainerPort{
			{Name: PortNameGRPC, ContainerPort: EPPGRPCPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameHealth, ContainerPort: EPPHealthPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameMetrics, ContainerPort: EPPMetricsPort, Protocol: corev1.ProtocolTCP},
		},
		// The picker reports SERVING only while it can route and, with
		// leader election, leads: the Service then sends ext_proc to the
		// leader alone.
		ReadinessProbe: readiness,
		LivenessProbe:  httpProbe("/healthz", EPPMetricsPort),
		Resources:      firstResources(over.Resources, cfg.Spec.EPP.Resources, cfg.Spec.PodDefaults.Resources),
	}
	volumes := withServingCertificate(cfg, &c, []corev1.Volume{
		mountReadOnly(&c, eppConfigVolume, eppConfigMountPath, configMapSource(m.Name))})
	return deployment(podParams{
		Meta:           m,
		PodLabels:      eppSelector(mr),
		Replicas:       replicas,
		Strategy:       strategy,
		Affinity:       affinity,
		Placement:      cfg.Spec.PodDefaults,
		ServiceAccount: m.Name,
		AutomountToken: true,
		Container:      c,
		Volumes:        volumes,
	})
}

// leaderReadiness probes a leader-elected picker every second, so that a new
// leader joins the Service (and Envoy's endpoints) about a second after it
// takes the lease rather than up to a 5 s period later; two failures take an
// ex-leader out, which meanwhile refuses streams with UNAVAILABLE anyway.
func leaderReadiness() *corev1.Probe {
	p := grpcProbe(EPPHealthPort)
	p.PeriodSeconds, p.FailureThreshold = 1, 2
	return p
}

// activePassiveRollout is the rollout of a leader-elected picker. Standbys
// never become ready, so the default rollout (no replica unavailable: wait
// for a new pod to be ready before removing an old one) would wait forever:
// no new pod can lead while the old leader holds the lease. 100% unavailable
// removes the old pods as the new ones are created (100% surge: all at once);
// the old leader releases the lease as it stops, and a new pod takes it once
// it has synced, so a rollout costs one pod start-up without a picker.
// Recreate would add the old pods' termination to that gap.
func activePassiveRollout() *appsv1.DeploymentStrategy {
	all := intstr.FromString("100%")
	return &appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &all, MaxSurge: &all}}
}

// spreadReplicas prefers nodes without another replica: a standby on the
// leader's node does not survive that node.
func spreadReplicas(selector map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: copyMap(selector)}}}},
	}}
}

func grpcProbe(port int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port}},
		PeriodSeconds: 5, FailureThreshold: 3}
}

func httpProbe(path string, port int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds: 10, FailureThreshold: 3}
}

func eppService(mr *igwv1.ModelRoute, cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta) *corev1.Service {
	return service(m, eppSelector(mr),
		servicePort(PortNameGRPC, EPPGRPCPort, extProcAppProtocol(cfg)),
		servicePort(PortNameMetrics, EPPMetricsPort, ""))
}

func inferencePool(mr *igwv1.ModelRoute, cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta, n RouteNames) *infv1.InferencePool {
	sel := map[infv1.LabelKey]infv1.LabelValue{}
	for k, v := range mr.Spec.Selector.MatchLabels {
		sel[infv1.LabelKey(k)] = infv1.LabelValue(v)
	}
	ports := make([]infv1.Port, len(mr.Spec.TargetPorts))
	for i, p := range mr.Spec.TargetPorts {
		ports[i] = infv1.Port{Number: infv1.PortNumber(p.Number)}
	}
	core := infv1.Group("")
	return &infv1.InferencePool{
		TypeMeta:   typeMeta(GroupInference+"/v1", KindInferencePool),
		ObjectMeta: m,
		Spec: infv1.InferencePoolSpec{
			Selector:    infv1.LabelSelector{MatchLabels: sel},
			TargetPorts: ports,
			AppProtocol: infv1.AppProtocolHTTP,
			EndpointPickerRef: &infv1.EndpointPickerRef{
				Group:       &core,
				Kind:        KindService,
				Name:        infv1.ObjectName(n.EPP),
				Port:        &infv1.Port{Number: EPPGRPCPort},
				FailureMode: infv1.EndpointPickerFailureMode(EPPFailureMode(mr, cfg)),
			},
		},
	}
}

// poolService is the Service of the pool's pods. Envoy Gateway builds the
// route's cluster from its EndpointSlices (the traffic policy forces endpoint
// routing), and the endpoint override then picks the EPP's choice among exactly
// those ready pods, so a client-sent destination header can never reach
// anything outside the pool. It keeps a cluster IP rather than being headless:
// a translator that routes to Services (Envoy Gateway's Service routing, or
// its offline translator) then still has an address and a cluster for it.
func poolService(mr *igwv1.ModelRoute, m metav1.ObjectMeta) *corev1.Service {
	ports := make([]corev1.ServicePort, len(mr.Spec.TargetPorts))
	for i, p := range mr.Spec.TargetPorts {
		ports[i] = corev1.ServicePort{Name: "http-" + strconv.Itoa(int(p.Number)), Port: p.Number,
			TargetPort: intstr.FromInt32(p.Number), Protocol: corev1.ProtocolTCP}
	}
	return service(m, copyMap(mr.Spec.Selector.MatchLabels), ports...)
}

// ServedNames are the names clients may send for a route: models, then adapters.
func ServedNames(mr *igwv1.ModelRoute) []string {
	names := make([]string, 0, len(mr.Spec.Models)+len(mr.Spec.Adapters))
	for _, m := range mr.Spec.Models {
		names = append(names, string(m))
	}
	for _, a := range mr.Spec.Adapters {
		names = append(names, string(a.Name))
	}
	return names
}

// httpRoute matches the model-name header (set by the body-based router) for
// every served name. With Envoy Gateway the backend is the pool's Service (see
// poolService); with a native InferencePool implementation it is the pool itself.
func httpRoute(mr *igwv1.ModelRoute, m metav1.ObjectMeta, gw GatewayTarget, n RouteNames, native bool) (*gwapiv1.HTTPRoute, error) {
	var backends []gwapiv1.HTTPBackendRef
	if native {
		group := gwapiv1.Group(GroupInference)
		kind := gwapiv1.Kind(KindInferencePool)
		backends = []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
			Group: &group, Kind: &kind, Name: gwapiv1.ObjectName(n.Pool)}}}}
	} else {
		for _, p := range mr.Spec.TargetPorts {
			port := gwapiv1.PortNumber(p.Number)
			backends = append(backends, gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(n.PoolService), Port: &port}}})
		}
	}
	var timeouts *gwapiv1.HTTPRouteTimeouts
	if t := mr.Spec.RequestTimeout; t != nil {
		d, err := GatewayDuration(t.Duration)
		if err != nil {
			return nil, fmt.Errorf("render: spec.requestTimeout: %w", err)
		}
		timeouts = &gwapiv1.HTTPRouteTimeouts{Request: &d}
	}
	names := ServedNames(mr)
	var rules []gwapiv1.HTTPRouteRule
	for start := 0; start < len(names); start += maxMatchesPerRule {
		end := min(start+maxMatchesPerRule, len(names))
		rule := gwapiv1.HTTPRouteRule{BackendRefs: backends, Timeouts: timeouts}
		for _, name := range names[start:end] {
			rule.Matches = append(rule.Matches, modelMatch(name))
		}
		rules = append(rules, rule)
	}
	return &gwapiv1.HTTPRoute{
		TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), KindHTTPRoute),
		ObjectMeta: m,
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{gw.parentRef()}},
			Rules:           rules,
		},
	}, nil
}

func modelMatch(name string) gwapiv1.HTTPRouteMatch {
	exact := gwapiv1.HeaderMatchExact
	return gwapiv1.HTTPRouteMatch{
		Path:    rootPath(),
		Headers: []gwapiv1.HTTPHeaderMatch{{Type: &exact, Name: gwapiv1.HTTPHeaderName(wire.HeaderModelName), Value: name}},
	}
}

func rootPath() *gwapiv1.HTTPPathMatch {
	prefix := gwapiv1.PathMatchPathPrefix
	root := "/"
	return &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &root}
}
