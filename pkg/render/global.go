package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/wire"
)

// The global picker (cmd/igw-global) as its Deployment runs it: the flags,
// the config file and the files of each member's credentials.
const (
	GlobalConfigKey        = "config.yaml"
	GlobalGRPCPort         = 9002
	GlobalMetricsPort      = 9090
	GlobalStatusPath       = "/status"
	globalContainer        = "global-picker"
	globalConfigMountPath  = "/etc/igw-global"
	globalConfigVolume     = "config"
	globalMembersMountPath = "/var/run/igw-global/members"
	globalTokenFile        = "token"
	globalCAFile           = CACertificateKey
	// Values of LabelName on the global picker's pods.
	NameGlobalPicker = "igw-global-picker"
	KindGlobal       = "GlobalInferenceGateway"
	KindBackend      = "Backend"
	// LabelGlobal marks every child of a GlobalInferenceGateway with its name.
	LabelGlobal = "gateway.igw.dev/global-gateway"
)

// Name suffixes of a GlobalInferenceGateway's children. The extension policy
// ends in SuffixEPPPolicy, so that pkg/egext treats the global picker as it
// treats a model's picker.
const (
	SuffixGlobalPicker  = "-global-picker"
	SuffixGlobalPolicy  = "-global" + SuffixEPPPolicy
	SuffixGlobalTraffic = "-global"
	SuffixGlobalMembers = "-members"
	globalModelInfix    = "-model-"
)

// GlobalInput is everything a GlobalInferenceGateway's children depend on.
type GlobalInput struct {
	Global *igwv1.GlobalInferenceGateway
	// Gateway is the hub's Gateway, which the global routes attach to: the one
	// of the InferenceGatewayConfig in spec.namespace, whose body-based router
	// sets the model header they match.
	Gateway GatewayTarget
	// RawPipeline is the content of spec.routing.configMapRef, when it is set.
	RawPipeline []byte
	Images      Images
}

// GlobalOutput is a GlobalInferenceGateway's children, in apply order.
type GlobalOutput struct {
	Objects []client.Object
	Names   GlobalNames
}

// GlobalNames are the names of a GlobalInferenceGateway's children.
type GlobalNames struct {
	// Picker names the global picker's Deployment, ConfigMap and Service;
	// Members the Backend of the member gateways.
	Picker, Members, Policy, TrafficPolicy string
	// Routes by model name.
	Routes map[string]string
}

// NamesForGlobal returns the child names of gig.
func NamesForGlobal(gig *igwv1.GlobalInferenceGateway) GlobalNames {
	n := GlobalNames{
		Picker:        ChildName(gig.Name, SuffixGlobalPicker),
		Policy:        ChildName(gig.Name, SuffixGlobalPolicy),
		TrafficPolicy: ChildName(gig.Name, SuffixGlobalTraffic),
		Members:       ChildName(gig.Name, SuffixGlobalMembers),
		Routes:        map[string]string{},
	}
	for _, m := range gig.Spec.Models {
		n.Routes[string(m.Name)] = LabelValue(gig.Name + globalModelInfix + dnsPart(string(m.Name)))
	}
	return n
}

// dnsPart makes a model name fit a DNS label: lower case, anything else than
// letters and digits a dash. When that changed the name, a short hash of the
// original keeps names that differ only there (Llama and llama) apart.
func dnsPart(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == name {
		return out
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimSuffix(out+"-", "-") + "-" + hex.EncodeToString(sum[:])[:hashLength]
}

// GlobalLabels are the labels of every child of a GlobalInferenceGateway.
func GlobalLabels(gig *igwv1.GlobalInferenceGateway) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelPartOf: PartOfValue, LabelGlobal: LabelValue(gig.Name)}
}

// Global renders the children of a GlobalInferenceGateway in its
// spec.namespace. It is a pure function of its input. The owner is cluster
// scoped, which a namespaced child may name as its controller: the garbage
// collector deletes the children with it.
func Global(in GlobalInput) (GlobalOutput, error) {
	gig := in.Global
	if gig == nil {
		return GlobalOutput{}, errors.New("render: the global gateway is required")
	}
	if gig.Spec.Routing != nil && gig.Spec.Routing.ConfigMapRef != nil && len(in.RawPipeline) == 0 {
		return GlobalOutput{}, fmt.Errorf("render: routing.configMapRef %s is set but its content is missing", gig.Spec.Routing.ConfigMapRef.Name)
	}
	n := NamesForGlobal(gig)
	labels := GlobalLabels(gig)
	ref := ownerReference(gig, KindGlobal)
	m := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: gig.Spec.Namespace, Labels: copyMap(labels),
			OwnerReferences: []metav1.OwnerReference{ref}}
	}
	cfg, err := GlobalPickerConfig(gig, in.RawPipeline)
	if err != nil {
		return GlobalOutput{}, err
	}
	out := GlobalOutput{Names: n}
	out.Objects = append(out.Objects,
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", KindConfigMap), ObjectMeta: m(n.Picker), Data: map[string]string{GlobalConfigKey: string(cfg)}},
		globalDeployment(gig, in.Images, m(n.Picker)),
		service(m(n.Picker), globalSelector(gig),
			servicePort(PortNameGRPC, GlobalGRPCPort, AppProtocolH2C),
			servicePort(PortNameMetrics, GlobalMetricsPort, "")),
	)
	b, err := membersBackend(m(n.Members), gig.Spec.Members)
	if err != nil {
		return GlobalOutput{}, err
	}
	out.Objects = append(out.Objects, b)
	group, kind := gwapiv1.Group(GroupEnvoyGateway), gwapiv1.Kind(KindBackend)
	backends := []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
		Group: &group, Kind: &kind, Name: gwapiv1.ObjectName(n.Members)}}}}
	var routes []string
	for _, model := range gig.Spec.Models {
		name := n.Routes[string(model.Name)]
		routes = append(routes, name)
		out.Objects = append(out.Objects, &gwapiv1.HTTPRoute{
			TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), KindHTTPRoute),
			ObjectMeta: m(name),
			Spec: gwapiv1.HTTPRouteSpec{
				CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{in.Gateway.parentRef()}},
				Rules:           []gwapiv1.HTTPRouteRule{{Matches: []gwapiv1.HTTPRouteMatch{modelMatch(string(model.Name))}, BackendRefs: backends}},
			},
		})
	}
	out.Objects = append(out.Objects,
		memberTrafficPolicy(m(n.TrafficPolicy), routes),
		globalExtensionPolicy(m(n.Policy), n.Picker, routes),
	)
	return out, nil
}

func globalSelector(gig *igwv1.GlobalInferenceGateway) map[string]string {
	return map[string]string{LabelName: NameGlobalPicker, LabelInstance: LabelValue(gig.Name)}
}

// GlobalPickerReplicas is the global picker's replica count: spec.picker's, else 1.
func GlobalPickerReplicas(gig *igwv1.GlobalInferenceGateway) int32 {
	if gig.Spec.Picker == nil {
		return 1
	}
	return firstInt32(1, gig.Spec.Picker.Replicas)
}

// globalDeployment runs the global picker with its config and, per member, a
// directory holding the member's token and CA: a projected volume of the
// Secrets' keys, renamed to the files the config names, so the tokens never
// pass through the operator. A Secret is optional to the kubelet: one missing
// Secret leaves that member unreachable (the picker reports it, the status
// names the Secret) instead of keeping every pod from starting. The pods need
// no API access.
func globalDeployment(gig *igwv1.GlobalInferenceGateway, images Images, m metav1.ObjectMeta) *appsv1.Deployment {
	var settings igwv1.PodSettings
	if gig.Spec.Picker != nil {
		settings = *gig.Spec.Picker
	}
	c := corev1.Container{
		Name:  globalContainer,
		Image: firstString(settings.Image, images.Global),
		Args: []string{
			"--config=" + globalConfigMountPath + "/" + GlobalConfigKey,
			"--grpc-port=" + strconv.Itoa(GlobalGRPCPort),
			"--http-port=0",
			"--metrics-port=" + strconv.Itoa(GlobalMetricsPort),
		},
		Ports: []corev1.ContainerPort{
			{Name: PortNameGRPC, ContainerPort: GlobalGRPCPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameMetrics, ContainerPort: GlobalMetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: httpProbe("/readyz", GlobalMetricsPort),
		LivenessProbe:  httpProbe("/healthz", GlobalMetricsPort),
		Resources:      firstResources(settings.Resources),
	}
	volumes := []corev1.Volume{mountReadOnly(&c, globalConfigVolume, globalConfigMountPath, configMapSource(m.Name))}
	optional := true
	for _, member := range gig.Spec.Members {
		volume := "member-" + member.Name
		sources := []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: member.CredentialsSecretRef.Name},
			Items:                []corev1.KeyToPath{{Key: secretKey(member.CredentialsSecretRef), Path: globalTokenFile}},
			Optional:             &optional}}}
		if ca := member.CASecretRef; ca != nil {
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: ca.Name},
				Items:                []corev1.KeyToPath{{Key: secretKey(*ca), Path: globalCAFile}},
				Optional:             &optional}})
		}
		volumes = append(volumes, mountReadOnly(&c, volume, memberDir(member.Name), corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: sources}}))
	}
	return deployment(podParams{
		Meta:      m,
		PodLabels: globalSelector(gig),
		Replicas:  GlobalPickerReplicas(gig),
		Container: c,
		Volumes:   volumes,
	})
}

// secretKey is a reference's key; "token" when unset (the API server defaults it too).
func secretKey(ref igwv1.SecretKeyRef) string { return firstString(ref.Key, globalTokenFile) }

func memberDir(member string) string { return globalMembersMountPath + "/" + member }

// globalConfig is the global picker's config file (cmd/igw-global --config).
// Its parser is the picker's and strict, so this writes no key it does not know.
type globalConfig struct {
	Pipeline string              `json:"pipeline,omitempty"`
	Policy   igwv1.GlobalPolicy  `json:"policy,omitempty"`
	Weights  map[string]int32    `json:"weights,omitempty"`
	Members  []globalMember      `json:"members"`
	Models   []globalModel       `json:"models"`
	Regions  []globalRegion      `json:"regions,omitempty"`
	Health   *globalHealthConfig `json:"health,omitempty"`
}

type globalMember struct {
	Name        string   `json:"name"`
	Region      string   `json:"region"`
	Address     string   `json:"address"`
	SummaryURLs []string `json:"summaryURLs"`
	TokenFile   string   `json:"tokenFile"`
	CAFile      string   `json:"caFile,omitempty"`
}

type globalModel struct {
	Name    string             `json:"name"`
	Regions []igwv1.RegionName `json:"regions,omitempty"`
}

type globalRegion struct {
	Region    igwv1.RegionName   `json:"region"`
	SpillOver []igwv1.RegionName `json:"spillOver,omitempty"`
	// MaxShare is a fraction; the spec's is a percentage.
	MaxShare *float64 `json:"maxShare,omitempty"`
}

type globalHealthConfig struct {
	ProbeInterval     string `json:"probeInterval,omitempty"`
	ProbeTimeout      string `json:"probeTimeout,omitempty"`
	FailedProbes      *int32 `json:"failedProbes,omitempty"`
	ConsecutiveErrors *int32 `json:"consecutiveErrors,omitempty"`
	BaseEjection      string `json:"baseEjection,omitempty"`
	MaxEjection       string `json:"maxEjection,omitempty"`
	SlowStart         string `json:"slowStart,omitempty"`
}

// GlobalPickerConfig writes the global picker's config file: the pipeline
// (raw from routing.configMapRef, else the policy and weights), the members
// with where their summaries and credentials are, the models with their
// pins, the region shaping and health settings the spec sets (the picker's
// defaults otherwise). The hub's own region is left to the picker's --region
// default: the spec does not say where the hub runs.
func GlobalPickerConfig(gig *igwv1.GlobalInferenceGateway, rawPipeline []byte) ([]byte, error) {
	c := globalConfig{Policy: igwv1.GlobalPolicyIGW}
	if r := gig.Spec.Routing; r != nil {
		switch {
		case r.ConfigMapRef != nil:
			c.Pipeline, c.Policy = string(rawPipeline), ""
		default:
			c.Policy = igwv1.GlobalPolicy(firstString(string(r.Policy), string(igwv1.GlobalPolicyIGW)))
			c.Weights = r.Weights
		}
	}
	for _, m := range gig.Spec.Members {
		gm := globalMember{Name: m.Name, Region: string(m.Region), Address: m.Address,
			SummaryURLs: []string{SummaryURL(m)}, TokenFile: memberDir(m.Name) + "/" + globalTokenFile}
		if m.CASecretRef != nil {
			gm.CAFile = memberDir(m.Name) + "/" + globalCAFile
		}
		c.Members = append(c.Members, gm)
	}
	for _, m := range gig.Spec.Models {
		c.Models = append(c.Models, globalModel{Name: string(m.Name), Regions: m.Regions})
	}
	for _, r := range gig.Spec.Regions {
		gr := globalRegion{Region: r.Region, SpillOver: r.SpillOver}
		if r.MaxShare != nil {
			share := float64(*r.MaxShare) / 100
			gr.MaxShare = &share
		}
		c.Regions = append(c.Regions, gr)
	}
	if h := gig.Spec.Health; h != nil {
		c.Health = &globalHealthConfig{
			ProbeInterval: durationString(h.ProbeInterval), ProbeTimeout: durationString(h.ProbeTimeout),
			FailedProbes: h.FailedProbes, ConsecutiveErrors: h.ConsecutiveErrors,
			BaseEjection: durationString(h.BaseEjectionTime), MaxEjection: durationString(h.MaxEjectionTime),
			SlowStart: durationString(h.SlowStart),
		}
	}
	return yaml.Marshal(c)
}

func durationString(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	return d.Duration.String()
}

// SummaryURL is where the hub reads a member's summary: spec's summaryURL,
// else the summary path on the member's gateway over HTTPS.
func SummaryURL(m igwv1.GlobalMember) string {
	if m.SummaryURL != "" {
		return m.SummaryURL
	}
	return "https://" + m.Address + wire.GlobalSummaryPath
}

// membersBackend is the member gateways as one Envoy Gateway Backend, an
// endpoint each: Envoy Gateway makes one cluster of it, the one in which the
// endpoint override finds the member the picker wrote (members in separate
// Backends with their own TLS settings would become one cluster each, picked
// by weight before any override applies). The TLS settings are therefore the
// same for every member: plaintext when every summaryURL is http://, else TLS
// with each member's host name as SNI and verified name, against the one CA
// Secret the members name or the system's CAs. What Envoy Gateway cannot put
// in one Backend is an error that says what to change.
func membersBackend(m metav1.ObjectMeta, members []igwv1.GlobalMember) (*egv1a1.Backend, error) {
	var endpoints []egv1a1.BackendEndpoint
	var plain, tls, withCA, byIP, byName []string
	cas := map[string]bool{}
	for _, member := range members {
		host, portText, err := net.SplitHostPort(member.Address)
		if err != nil {
			return nil, fmt.Errorf("render: members[%s].address %q: %w", member.Name, member.Address, err)
		}
		port, err := strconv.ParseInt(portText, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("render: members[%s].address %q: bad port: %w", member.Name, member.Address, err)
		}
		e := egv1a1.BackendEndpoint{}
		if net.ParseIP(host) != nil {
			e.IP = &egv1a1.IPEndpoint{Address: host, Port: int32(port)}
			if name := memberHostname(member); name != "" {
				e.Hostname = &name
			}
			byIP = append(byIP, member.Name)
		} else {
			e.FQDN = &egv1a1.FQDNEndpoint{Hostname: strings.ToLower(host), Port: int32(port)}
			byName = append(byName, member.Name)
		}
		endpoints = append(endpoints, e)
		if strings.HasPrefix(member.SummaryURL, "http://") {
			plain = append(plain, member.Name)
			continue
		}
		tls = append(tls, member.Name)
		if e.IP != nil && e.Hostname == nil {
			return nil, fmt.Errorf("render: members[%s] is reached over TLS at IP address %s with no host name to verify its certificate against: give it a summaryURL https://HOSTNAME/... or an http:// one for plaintext", member.Name, host)
		}
		if ca := member.CASecretRef; ca != nil {
			if secretKey(*ca) != CACertificateKey {
				return nil, fmt.Errorf("render: members[%s].caSecretRef.key is %q: Envoy Gateway reads a CA from the key %q, so set that key", member.Name, secretKey(*ca), CACertificateKey)
			}
			cas[ca.Name] = true
			withCA = append(withCA, member.Name)
		}
	}
	switch {
	case len(byIP) > 0 && len(byName) > 0:
		return nil, fmt.Errorf("render: members %s are addressed by IP and %s by host name; Envoy Gateway cannot mix the two in one Backend: address them all one way", strings.Join(byIP, ", "), strings.Join(byName, ", "))
	case len(plain) > 0 && len(tls) > 0:
		return nil, fmt.Errorf("render: members %s are reached in plaintext (http:// summaryURL) and %s over TLS; one Backend has one TLS setting: reach them all one way", strings.Join(plain, ", "), strings.Join(tls, ", "))
	case len(cas) > 0 && len(withCA) < len(tls):
		return nil, fmt.Errorf("render: members %s name a caSecretRef and the others reached over TLS do not; Envoy Gateway verifies every member against the same CAs: name the Secret from every member, or from none for the system's CAs", strings.Join(withCA, ", "))
	case len(cas) > 1:
		return nil, fmt.Errorf("render: members name %d different caSecretRefs; Envoy Gateway verifies every member against one CA bundle: put the CAs in one Secret (key %q) and name it from each member", len(cas), CACertificateKey)
	}
	b := &egv1a1.Backend{
		TypeMeta:   typeMeta(egAPIVersion, KindBackend),
		ObjectMeta: m,
		Spec:       egv1a1.BackendSpec{Endpoints: endpoints},
	}
	if len(tls) > 0 {
		auto := true
		b.Spec.TLS = &egv1a1.BackendTLSSettings{AutoSNIFromEndpointHostname: &auto}
		for name := range cas {
			b.Spec.TLS.CACertificateRefs = []gwapiv1.LocalObjectReference{{Group: "", Kind: "Secret", Name: gwapiv1.ObjectName(name)}}
		}
		if len(cas) == 0 {
			system := gwapiv1.WellKnownCACertificatesSystem
			b.Spec.TLS.WellKnownCACertificates = &system
		}
	}
	return b, nil
}

// memberHostname is the name the member's certificate must hold: the host of
// its address, or for an IP address the host of its summary URL; "" when
// neither is a name.
func memberHostname(member igwv1.GlobalMember) string {
	if host, _, err := net.SplitHostPort(member.Address); err == nil && net.ParseIP(host) == nil {
		return strings.ToLower(host)
	}
	if u, err := url.Parse(member.SummaryURL); err == nil && u.Hostname() != "" && net.ParseIP(u.Hostname()) == nil {
		return strings.ToLower(u.Hostname())
	}
	return ""
}

// memberTrafficPolicy sends each global request to the member the global
// picker wrote in the destination header (its fallback next), with the model
// routes' retry: once, on that fallback, when the first member fails before
// its response starts (a connection failure, a reset, a 500/502/503/504).
// Envoy retries only before it forwards response headers, so a client never
// sees half an answer twice.
func memberTrafficPolicy(m metav1.ObjectMeta, routes []string) *egv1a1.BackendTrafficPolicy {
	return endpointOverridePolicy(m, routes...)
}

// globalExtensionPolicy puts the global picker on the global routes as
// ext_proc, failing closed, so both bodies stream full-duplex: it reads the
// prompt for the members' digests and times the first response byte. It is
// named like a model picker's policy, so the extension server's fix-ups
// apply to it unchanged. The response carries the answering member's
// address and the attempts Envoy made, so that a request retried on the
// fallback is credited to the member that served it.
func globalExtensionPolicy(m metav1.ObjectMeta, picker string, routes []string) *egv1a1.EnvoyExtensionPolicy {
	p := pickerExtensionPolicy(m, picker, GlobalGRPCPort, igwv1.FailClose, routes...)
	p.Spec.ExtProc[0].ProcessingMode.Response.Attributes = []string{wire.AttributeUpstreamAddress, wire.AttributeUpstreamAttempts}
	return p
}
