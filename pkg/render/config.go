package render

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/wire"
)

// Body-based router settings inside its pod.
const (
	AdapterMappingKey     = "adapters.yaml"
	ModelListKey          = openaimodels.FileName
	bbrMappingMountPath   = "/etc/igw/bbr"
	bbrMappingVolume      = "adapters"
	defaultMaxRequestBody = 4 << 20
	managedListenerHTTP   = "http"
	managedListenerHTTPS  = "https"
	defaultManagedPort    = 80
	bbrBodyMode           = "buffered"
)

// ConfigInput is everything an InferenceGatewayConfig's children depend on.
type ConfigInput struct {
	Config *igwv1.InferenceGatewayConfig
	// Routes are the ModelRoutes that refer to the config; their adapters make
	// up the body-based router's mapping, their models and adapters its model list.
	Routes []igwv1.ModelRoute
	Images Images
}

// ConfigOutput is a config's children and the facts its status reports.
type ConfigOutput struct {
	Objects []client.Object
	Names   ConfigNames
	Gateway GatewayTarget
	// AdapterConflicts names adapters that two routes map to different base
	// models; the first route in name order wins.
	AdapterConflicts []string
}

// Config renders the children of an InferenceGatewayConfig. It is a pure function of its input.
func Config(in ConfigInput) (ConfigOutput, error) {
	cfg := in.Config
	if cfg == nil {
		return ConfigOutput{}, errors.New("render: config is required")
	}
	n := NamesForConfig(cfg.Name)
	gw := ResolveGateway(cfg)
	out := ConfigOutput{Names: n, Gateway: gw}
	labels := ConfigLabels(cfg)
	local := func(name string) metav1.ObjectMeta { return meta(name, cfg.Namespace, labels, cfg, KindConfig) }
	atGateway := func(name string) metav1.ObjectMeta { return meta(name, gw.Namespace, labels, cfg, KindConfig) }
	envoyGateway := cfg.Spec.Gateway.Provider != igwv1.ProviderNative

	if gw.Managed {
		out.Objects = append(out.Objects, managedGateway(cfg, local(gw.Name)))
	}
	if BBREnabled(cfg) {
		mapping, conflicts := AdapterMapping(in.Routes)
		out.AdapterConflicts = conflicts
		data, err := MarshalAdapterMapping(mapping)
		if err != nil {
			return ConfigOutput{}, err
		}
		list, err := openaimodels.MarshalFile(ModelList(in.Routes))
		if err != nil {
			return ConfigOutput{}, err
		}
		out.Objects = append(out.Objects,
			&corev1.ConfigMap{TypeMeta: typeMeta("v1", KindConfigMap), ObjectMeta: local(n.AdapterMapping),
				Data: map[string]string{AdapterMappingKey: string(data), ModelListKey: string(list)}},
			bbrDeployment(cfg, in.Images, local(n.BBR), n),
			bbrService(cfg, local(n.BBR)),
		)
		if p := extProcTLSPolicy(cfg, local(n.BBR), n.BBR); p != nil {
			out.Objects = append(out.Objects, p)
		}
		if p := extProcNetworkPolicy(cfg, local(n.BBR), bbrSelector(cfg), []int32{BBRGRPCPort, BBRModelsPort}, []int32{BBRHealthPort, BBRMetricsPort}); p != nil {
			out.Objects = append(out.Objects, p)
		}
	}
	if envoyGateway {
		out.Objects = append(out.Objects, modelNotFoundFilter(local(n.ModelNotFound)))
	}
	out.Objects = append(out.Objects, catchAllRoute(local(n.CatchAll), gw, n, envoyGateway))
	if BBREnabled(cfg) {
		out.Objects = append(out.Objects, modelListRoute(local(n.ModelList), gw, n.BBR))
	}
	if envoyGateway {
		if BBREnabled(cfg) {
			out.Objects = append(out.Objects, bbrExtensionPolicy(atGateway(n.BBRPolicy), gw, n.BBR, cfg.Namespace))
			if gw.Namespace != cfg.Namespace {
				out.Objects = append(out.Objects, bbrReferenceGrant(local(n.ReferenceGrant), gw.Namespace, n.BBR))
			}
		}
		out.Objects = append(out.Objects, bufferLimitPolicy(atGateway(n.BufferLimit), gw, maxRequestBody(cfg)))
		if cfg.Spec.Auth != nil && cfg.Spec.Auth.JWT != nil {
			out.Objects = append(out.Objects, jwtPolicy(atGateway(n.Auth), gw, cfg.Spec.Auth.JWT))
		}
	}
	return out, nil
}

// BBREnabled reports whether the config runs the body-based router (on unless turned off).
func BBREnabled(cfg *igwv1.InferenceGatewayConfig) bool {
	return cfg.Spec.BBR.Enabled == nil || *cfg.Spec.BBR.Enabled
}

func maxRequestBody(cfg *igwv1.InferenceGatewayConfig) int64 {
	if cfg.Spec.BBR.MaxRequestBodyBytes > 0 {
		return cfg.Spec.BBR.MaxRequestBodyBytes
	}
	return defaultMaxRequestBody
}

// AdapterMapping maps every adapter of the routes to its base model; an adapter
// without one belongs to its route's only model. Routes are taken in name
// order, so when two disagree the result is stable and the conflict reported.
func AdapterMapping(routes []igwv1.ModelRoute) (map[string]string, []string) {
	mapping := map[string]string{}
	var conflicts []string
	for _, mr := range byName(routes) {
		for _, a := range mr.Spec.Adapters {
			base := string(a.BaseModel)
			if base == "" && len(mr.Spec.Models) > 0 {
				base = string(mr.Spec.Models[0])
			}
			if prev, ok := mapping[string(a.Name)]; ok {
				if prev != base && !slices.Contains(conflicts, string(a.Name)) {
					conflicts = append(conflicts, string(a.Name))
				}
				continue
			}
			mapping[string(a.Name)] = base
		}
	}
	slices.Sort(conflicts)
	return mapping, conflicts
}

// byName returns the routes sorted by name: the order in which the first of
// several routes claiming a name wins.
func byName(routes []igwv1.ModelRoute) []igwv1.ModelRoute {
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b igwv1.ModelRoute) int { return strings.Compare(a.Name, b.Name) })
	return sorted
}

// ModelList is what the body-based router answers GET /v1/models with: every
// name the routes serve, each route's models and then its adapters (with their
// base model as parent, as AdapterMapping resolves it), routes in name order.
// A name several routes claim is listed once, as the first route has it.
func ModelList(routes []igwv1.ModelRoute) []openaimodels.Entry {
	mapping, _ := AdapterMapping(routes)
	seen := map[string]bool{}
	var out []openaimodels.Entry
	add := func(e openaimodels.Entry) {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	for _, mr := range byName(routes) {
		for _, m := range mr.Spec.Models {
			add(openaimodels.Entry{ID: string(m)})
		}
		for _, a := range mr.Spec.Adapters {
			add(openaimodels.Entry{ID: string(a.Name), Parent: mapping[string(a.Name)]})
		}
	}
	return out
}

// MarshalAdapterMapping writes the body-based router's --adapter-mapping-file:
// `adapters: {ADAPTER: BASE_MODEL, ...}`, keys sorted, "adapters: {}" when empty.
func MarshalAdapterMapping(mapping map[string]string) ([]byte, error) {
	if mapping == nil {
		mapping = map[string]string{}
	}
	return yaml.Marshal(struct {
		Adapters map[string]string `json:"adapters"`
	}{mapping})
}

func bbrSelector(cfg *igwv1.InferenceGatewayConfig) map[string]string {
	return map[string]string{LabelName: NameBBR, LabelInstance: LabelValue(cfg.Name)}
}

// bbrDeployment runs the body-based router. It needs no API access, so its pods
// get no service account token.
func bbrDeployment(cfg *igwv1.InferenceGatewayConfig, images Images, m metav1.ObjectMeta, n ConfigNames) *appsv1.Deployment {
	c := corev1.Container{
		Name:  "bbr",
		Image: firstString(cfg.Spec.BBR.Image, images.BBR),
		Args: []string{
			"--grpc-port=" + strconv.Itoa(BBRGRPCPort),
			"--health-port=" + strconv.Itoa(BBRHealthPort),
			"--metrics-port=" + strconv.Itoa(BBRMetricsPort),
			"--models-port=" + strconv.Itoa(BBRModelsPort),
			"--max-request-body-bytes=" + strconv.FormatInt(maxRequestBody(cfg), 10),
			"--adapter-mapping-file=" + bbrMappingMountPath + "/" + AdapterMappingKey,
			"--model-list-file=" + bbrMappingMountPath + "/" + ModelListKey,
			"--body-mode=" + bbrBodyMode,
		},
		Ports: []corev1.ContainerPort{
			{Name: PortNameGRPC, ContainerPort: BBRGRPCPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameHealth, ContainerPort: BBRHealthPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameMetrics, ContainerPort: BBRMetricsPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameModels, ContainerPort: BBRModelsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: grpcProbe(BBRHealthPort),
		LivenessProbe:  grpcProbe(BBRHealthPort),
		Resources:      firstResources(cfg.Spec.BBR.Resources, cfg.Spec.PodDefaults.Resources),
	}
	volumes := withServingCertificate(cfg, &c, []corev1.Volume{
		mountReadOnly(&c, bbrMappingVolume, bbrMappingMountPath, configMapSource(n.AdapterMapping))})
	return deployment(podParams{
		Meta:      m,
		PodLabels: bbrSelector(cfg),
		Replicas:  firstInt32(1, cfg.Spec.BBR.Replicas),
		Placement: cfg.Spec.PodDefaults,
		Container: c,
		Volumes:   volumes,
	})
}

func bbrService(cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta) *corev1.Service {
	return service(m, bbrSelector(cfg),
		servicePort(PortNameGRPC, BBRGRPCPort, extProcAppProtocol(cfg)),
		servicePort(PortNameMetrics, BBRMetricsPort, ""),
		servicePort(PortNameModels, BBRModelsPort, ""))
}

// bbrReferenceGrant lets the router's policy, which must live beside a Gateway
// in another namespace, reach the router's Service in the config's namespace.
func bbrReferenceGrant(m metav1.ObjectMeta, gatewayNamespace, service string) *gwapiv1beta1.ReferenceGrant {
	name := gwapiv1.ObjectName(service)
	return &gwapiv1beta1.ReferenceGrant{
		TypeMeta:   typeMeta(gwapiv1beta1.GroupVersion.String(), "ReferenceGrant"),
		ObjectMeta: m,
		Spec: gwapiv1beta1.ReferenceGrantSpec{
			From: []gwapiv1beta1.ReferenceGrantFrom{{Group: GroupEnvoyGateway, Kind: KindEEP, Namespace: gwapiv1.Namespace(gatewayNamespace)}},
			To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: KindService, Name: &name}},
		},
	}
}

// catchAllRoute is the rule every request matches before the body-based router
// has set the model header (Envoy runs route filters only once a route
// matched), and the one a request for an unknown model ends on: with Envoy
// Gateway it answers the OpenAI-style 404; elsewhere it has no backend, and the
// gateway implementation decides the answer (Gateway API fixes no status for a
// rule without backends).
func catchAllRoute(m metav1.ObjectMeta, gw GatewayTarget, n ConfigNames, envoyGateway bool) *gwapiv1.HTTPRoute {
	rule := gwapiv1.HTTPRouteRule{Matches: []gwapiv1.HTTPRouteMatch{{Path: rootPath()}}}
	if envoyGateway {
		rule.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
			Group: GroupEnvoyGateway, Kind: KindHTTPRouteFilt, Name: gwapiv1.ObjectName(n.ModelNotFound)}}}
	}
	return &gwapiv1.HTTPRoute{
		TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), KindHTTPRoute),
		ObjectMeta: m,
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{gw.parentRef()}},
			Rules:           []gwapiv1.HTTPRouteRule{rule},
		},
	}
}

// modelListRoute sends GET /v1/models and GET /v1/models/{id} (every method,
// so that the router's 405 answers the others) to the body-based router's
// models port, which lists every model and adapter the config's routes serve
// and answers for each. The path prefix /v1/models (element-wise: not
// /v1/modelsx) is longer than the model routes' and the catch-all's /, so it
// outranks them (Gateway API precedence: exact path, then the longest prefix,
// before any header match), whatever model header a request carries. The backend is a plain
// Service port, so the rule needs no ext_proc and works on any Gateway API
// implementation; with Envoy Gateway the router's Gateway-wide ext_proc still
// runs on it and passes the bodiless GET through.
func modelListRoute(m metav1.ObjectMeta, gw GatewayTarget, bbrService string) *gwapiv1.HTTPRoute {
	prefix := gwapiv1.PathMatchPathPrefix
	path := wire.ModelsPath
	port := gwapiv1.PortNumber(BBRModelsPort)
	return &gwapiv1.HTTPRoute{
		TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), KindHTTPRoute),
		ObjectMeta: m,
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{gw.parentRef()}},
			Rules: []gwapiv1.HTTPRouteRule{{
				Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
				BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
					Name: gwapiv1.ObjectName(bbrService), Port: &port}}}},
			}},
		},
	}
}

// managedGateway is the Gateway the operator creates when the config asks for
// one: a single listener, HTTPS when a certificate is given, open to routes of
// the config's namespace (where its ModelRoutes live).
func managedGateway(cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta) *gwapiv1.Gateway {
	managed := cfg.Spec.Gateway.Managed
	port := managed.Port
	if port == 0 {
		port = defaultManagedPort
	}
	same := gwapiv1.NamespacesFromSame
	l := gwapiv1.Listener{
		Name:          managedListenerHTTP,
		Protocol:      gwapiv1.HTTPProtocolType,
		Port:          gwapiv1.PortNumber(port),
		AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &same}},
	}
	if cfg.Spec.TLS != nil {
		mode := gwapiv1.TLSModeTerminate
		l.Name = managedListenerHTTPS
		l.Protocol = gwapiv1.HTTPSProtocolType
		l.TLS = &gwapiv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gwapiv1.SecretObjectReference{{
			Name: gwapiv1.ObjectName(cfg.Spec.TLS.CertificateSecretName)}}}
	}
	return &gwapiv1.Gateway{
		TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), KindGateway),
		ObjectMeta: m,
		Spec: gwapiv1.GatewaySpec{
			GatewayClassName: gwapiv1.ObjectName(managed.GatewayClassName),
			Listeners:        []gwapiv1.Listener{l},
		},
	}
}
