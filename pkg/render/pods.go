package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// Images are the operator's default images, used unless a config or route names one.
type Images struct {
	EPP string
	BBR string
	// Global is the global picker's (cmd/igw-global), unless spec.picker names one.
	Global string
}

// Ports of the endpoint picker and the body-based router (their flags' defaults).
const (
	EPPGRPCPort    = 9002
	EPPHealthPort  = 9003
	EPPMetricsPort = 9090
	BBRGRPCPort    = 9004
	BBRHealthPort  = 9005
	BBRMetricsPort = 9090
	BBRModelsPort  = 9006

	PortNameGRPC    = "grpc"
	PortNameHealth  = "grpc-health"
	PortNameMetrics = "metrics"
	PortNameModels  = "models"
	// AppProtocolH2C tells gateways that the ext_proc ports speak cleartext HTTP/2.
	AppProtocolH2C = "kubernetes.io/h2c"
)

// defaultResources apply when neither the component nor the config's pod defaults set any.
var defaultResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("250m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	},
}

// firstResources returns the first non-nil requirements, else the defaults.
func firstResources(candidates ...*corev1.ResourceRequirements) corev1.ResourceRequirements {
	for _, r := range candidates {
		if r != nil {
			return *r.DeepCopy()
		}
	}
	return *defaultResources.DeepCopy()
}

// mountReadOnly mounts a volume of source at path in c, read-only, and
// returns the volume for c's pod.
func mountReadOnly(c *corev1.Container, name, path string, source corev1.VolumeSource) corev1.Volume {
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true})
	return corev1.Volume{Name: name, VolumeSource: source}
}

// configMapSource is a volume holding the keys of the ConfigMap name.
func configMapSource(name string) corev1.VolumeSource {
	return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func firstString(candidates ...string) string {
	for _, s := range candidates {
		if s != "" {
			return s
		}
	}
	return ""
}

func firstInt32(fallback int32, candidates ...*int32) int32 {
	for _, p := range candidates {
		if p != nil {
			return *p
		}
	}
	return fallback
}

// hardenedContainer fills the security settings every operator-run container shares:
// the binaries need no privileges, no writable root and no service account beyond
// what their Role grants.
func hardenedContainer(c corev1.Container) corev1.Container {
	f, t := false, true
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: &f,
		ReadOnlyRootFilesystem:   &t,
		RunAsNonRoot:             &t,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	return c
}

// podParams describe one operator-run Deployment.
type podParams struct {
	Meta           metav1.ObjectMeta
	PodLabels      map[string]string // the template's labels, which are also the selector
	Replicas       int32
	Strategy       *appsv1.DeploymentStrategy // nil: never below the replica count (see deployment)
	Affinity       *corev1.Affinity
	Placement      igwv1.PodPlacement
	ServiceAccount string
	AutomountToken bool
	Container      corev1.Container
	Volumes        []corev1.Volume
}

// deployment wraps one container in a Deployment that never drops below its
// replica count during a rollout: a picker or router going away fails requests.
func deployment(p podParams) *appsv1.Deployment {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	t := true
	automount := p.AutomountToken
	replicas := p.Replicas
	strategy := appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one},
	}
	if p.Strategy != nil {
		strategy = *p.Strategy
	}
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: p.Meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: copyMap(p.PodLabels)},
			Strategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyMap(p.PodLabels)},
				Spec: corev1.PodSpec{
					ServiceAccountName:           p.ServiceAccount,
					AutomountServiceAccountToken: &automount,
					Affinity:                     p.Affinity,
					NodeSelector:                 p.Placement.NodeSelector,
					Tolerations:                  p.Placement.Tolerations,
					SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &t},
					Containers:                   []corev1.Container{hardenedContainer(p.Container)},
					Volumes:                      p.Volumes,
				},
			},
		},
	}
}
