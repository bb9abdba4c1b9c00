package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/bbr"
	eppoptions "github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/runner"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/wire"
)

// simulator is one model server: a Pod in the API server whose IP is a
// loopback address on which a modelsim process listens at the pool's target port.
type simulator struct {
	Namespace, Pod string
	// Addr is ip:port, the endpoint the pool has for the Pod.
	Addr string
	proc *simproc.Proc
}

// configOnGateway makes namespace ns with a Gateway and an
// InferenceGatewayConfig attached to it, what a platform team sets up before
// its model routes.
func configOnGateway(ns, gateway, config string) {
	GinkgoHelper()
	Expect(fixtures.Namespace(ctx, k8s, ns)).To(Succeed())
	_, err := fixtures.Gateway(ctx, k8s, ns, gateway)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: gateway}}}})).To(Succeed())
}

// startSimulator creates the Pod, which kube-scheduler places on kwok's
// node and kwok runs with a loopback IP, and then plays the container
// runtime: modelsim listens on the Pod's IP and port, and the Pod turns
// Ready once it does.
func startSimulator(ns, pod string, podLabels map[string]string, port int, opts simproc.Options) *simulator {
	_, err := fixtures.ModelPod(ctx, k8s, ns, pod, podLabels, "")
	Expect(err).NotTo(HaveOccurred())
	p, err := testenv.StartSimulator(ctx, GinkgoT(), k8s, ns, pod, port, opts)
	Expect(err).NotTo(HaveOccurred())
	return &simulator{Namespace: ns, Pod: pod, Addr: p.Addr, proc: p}
}

// setReady makes the simulator's readiness probe pass or fail; kwok, as the
// kubelet, then turns its Pod ready or not ready.
func (s *simulator) setReady(ready bool) {
	GinkgoHelper()
	Expect(testenv.SetReadinessProbe(ctx, k8s, s.Namespace, s.Pod, ready)).To(Succeed())
}

// metrics reads the simulator's Prometheus metrics.
func (s *simulator) metrics() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(s.proc.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// completed is how many requests the simulator finished (stop or length):
// what it served, whoever routed the requests there.
func (s *simulator) completed() int {
	fams, err := s.metrics()
	Expect(err).NotTo(HaveOccurred())
	n := 0.0
	for _, m := range fams[wire.VLLMRequestSuccess].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == wire.VLLMLabelFinishedReason && (l.GetValue() == "stop" || l.GetValue() == "length") {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

// completedBy sums completed() over simulators, keyed by Pod name.
func completedBy(sims ...*simulator) map[string]int {
	out := map[string]int{}
	for _, s := range sims {
		out[s.Pod] = s.completed()
	}
	return out
}

// process is one replica of a Deployment the operator rendered, run in
// process by playing the kubelet: the ConfigMap volumes are files kept in
// sync with the API server, the container's arguments are parsed by the
// binary's own flags, and every container port is a loopback address.
type process struct {
	Deployment *appsv1.Deployment
	// ports maps a container port number to the address that serves it.
	ports map[int32]string
	// EPP is the endpoint picker's runner; nil for the body-based router.
	EPP *runner.Runner
	// Stop ends the process, as the kubelet does on deletion; later calls do nothing.
	Stop func()
}

// runnable is what cmd/epp and cmd/bbr run.
type runnable interface {
	Run(ctx context.Context, ready chan<- struct{}) error
	Addr(name string) string
}

// runDeployment starts the Deployment's pod in process, waits for its
// readiness probe to pass, and waits until the deployment controller reports
// the Deployment available (its Pods run on kwok's node, which knows nothing
// of the process).
func runDeployment(ns, name string) *process {
	p := startPod(ns, name)
	c := p.Deployment.Spec.Template.Spec.Containers[0]
	By("probing " + name + " as the kubelet does, then waiting for the Deployment to be available")
	Expect(c.ReadinessProbe).NotTo(BeNil())
	Eventually(func() error { return p.probe(c, c.ReadinessProbe) }, eventually, poll).Should(Succeed())
	waitAvailable(ns, name)
	return p
}

// waitAvailable waits until the deployment controller reports every replica
// of Deployment ns/name updated and available.
func waitAvailable(ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		return testenv.DeploymentAvailable(&d)
	}, eventually, poll).Should(Succeed())
}

// startPod starts one pod of the Deployment as it is now, and returns once its
// listeners are open.
func startPod(ns, name string) *process {
	d := &appsv1.Deployment{}
	Eventually(func() error { return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d) }, eventually, poll).Should(Succeed())
	spec := d.Spec.Template.Spec
	Expect(spec.Containers).To(HaveLen(1))
	c := spec.Containers[0]
	args := mountConfigMaps(ns, spec.Volumes, c.VolumeMounts, c.Args)

	p := &process{Deployment: d, ports: map[int32]string{}}
	var r runnable
	var byFlag map[int]string // the listener each port of the rendered flags opens
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	log := slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn})).With("pod", name)
	switch app := d.Spec.Template.Labels[render.LabelName]; app {
	case render.NameEPP:
		o := eppoptions.New()
		o.AddFlags(fs)
		byFlag = parseArgs(fs, args, &o.BindAddress, map[string]*int{"grpc": &o.GRPCPort, "health": &o.HealthPort, "metrics": &o.MetricsPort})
		// In the cluster the picker reaches the API server with its service
		// account's token: here it acts as that account.
		o.Kubeconfig = serviceAccountKubeconfig(ns, spec.ServiceAccountName)
		for _, e := range c.Env {
			if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" && o.PoolNamespace == "" {
				o.PoolNamespace = ns
			}
		}
		o.Complete()
		Expect(o.Validate()).To(Succeed())
		er, err := runner.New(o, log)
		Expect(err).NotTo(HaveOccurred())
		p.EPP, r = er, er
	case render.NameBBR:
		o := bbr.NewOptions()
		o.AddFlags(fs)
		byFlag = parseArgs(fs, args, &o.BindAddress,
			map[string]*int{"grpc": &o.GRPCPort, "health": &o.HealthPort, "metrics": &o.MetricsPort, "models": &o.ModelsPort})
		o.Complete()
		Expect(o.Validate()).To(Succeed())
		br, err := bbr.NewRunner(o, log)
		Expect(err).NotTo(HaveOccurred())
		r = br
	default:
		Fail(fmt.Sprintf("Deployment %s/%s runs %q, which the suite cannot run", ns, name, app))
	}

	runCtx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(r.Run(runCtx, ready)).To(Succeed(), "pod of Deployment %s/%s", ns, name)
	}()
	p.Stop = func() { stop(); <-done }
	DeferCleanup(p.Stop)
	Eventually(ready, eventually).Should(BeClosed())
	for _, cp := range c.Ports {
		listener, ok := byFlag[int(cp.ContainerPort)]
		Expect(ok).To(BeTrue(), "container port %d (%s) is not one the binary's flags open", cp.ContainerPort, cp.Name)
		p.ports[cp.ContainerPort] = r.Addr(listener)
	}
	return p
}

// parseArgs parses the container's arguments with the binary's own flags,
// then moves its listeners (ports, by the name Addr knows each by) to free
// loopback ports, as a pod's own network namespace would make the rendered
// ports free. It returns the listener each rendered port number opens.
func parseArgs(fs *pflag.FlagSet, args []string, bind *string, ports map[string]*int) map[int]string {
	Expect(fs.Parse(args)).To(Succeed(), "the operator's arguments %q", args)
	Expect(fs.Args()).To(BeEmpty(), "arguments the binary does not take")
	byFlag := map[int]string{}
	for listener, port := range ports {
		byFlag[*port] = listener
		*port = 0
	}
	*bind = "127.0.0.1"
	return byFlag
}

// port resolves a container port by number or name.
func (p *process) port(c corev1.Container, port intstr.IntOrString) (string, error) {
	if port.Type == intstr.Int {
		if a, ok := p.ports[port.IntVal]; ok {
			return a, nil
		}
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal && port.Type == intstr.String {
			return p.ports[cp.ContainerPort], nil
		}
	}
	return "", fmt.Errorf("port %s is not a container port", port.String())
}

// probe runs a gRPC or HTTP probe once.
func (p *process) probe(c corev1.Container, pr *corev1.Probe) error {
	switch {
	case pr.GRPC != nil:
		addr, err := p.port(c, intstr.FromInt32(pr.GRPC.Port))
		if err != nil {
			return err
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		service := ""
		if pr.GRPC.Service != nil {
			service = *pr.GRPC.Service
		}
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return err
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("gRPC health: %s", res.GetStatus())
		}
		return nil
	case pr.HTTPGet != nil:
		addr, err := p.port(c, pr.HTTPGet.Port)
		if err != nil {
			return err
		}
		resp, err := http.Get("http://" + addr + pr.HTTPGet.Path)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %d %s", pr.HTTPGet.Path, resp.StatusCode, body)
		}
		return nil
	}
	return fmt.Errorf("unsupported probe %+v", pr)
}

// serves reports whether the pod's labels match selector.
func (p *process) serves(ns string, selector map[string]string) bool {
	return p.Deployment.Namespace == ns && len(selector) > 0 &&
		labels.SelectorFromSet(selector).Matches(labels.Set(p.Deployment.Spec.Template.Labels))
}

// mountConfigMaps plays the kubelet's ConfigMap volumes: each mounted
// ConfigMap's keys become files in a directory kept in sync with the API
// server (replaced whole on change, as the kubelet's symlink swap does). The
// arguments are returned with each mount path replaced by its directory.
func mountConfigMaps(ns string, volumes []corev1.Volume, mounts []corev1.VolumeMount, args []string) []string {
	out := append([]string(nil), args...)
	for _, m := range mounts {
		var src *corev1.ConfigMapVolumeSource
		for _, v := range volumes {
			if v.Name == m.Name {
				src = v.ConfigMap
			}
		}
		Expect(src).NotTo(BeNil(), "volume %s: only ConfigMap volumes are played", m.Name)
		dir := GinkgoT().TempDir()
		sync := configMapSync{key: types.NamespacedName{Namespace: ns, Name: src.Name}, dir: dir, items: src.Items}
		Eventually(sync.once, eventually, poll).Should(Succeed(), "ConfigMap %s", src.Name)
		syncCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); sync.run(syncCtx) }()
		DeferCleanup(func() { stop(); <-done })
		for i, a := range out {
			out[i] = strings.ReplaceAll(a, m.MountPath, dir)
		}
	}
	return out
}

// configMapSync keeps a directory equal to one ConfigMap's data.
type configMapSync struct {
	key   types.NamespacedName
	dir   string
	items []corev1.KeyToPath

	mu   sync.Mutex
	last map[string]string
}

func (s *configMapSync) run(ctx context.Context) {
	failing := "" // the error last logged: an API server outage is logged once, not ten times a second
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := s.once()
		switch {
		case err == nil:
			failing = ""
		case ctx.Err() == nil && err.Error() != failing:
			failing = err.Error()
			GinkgoWriter.Printf("ConfigMap %s: %v\n", s.key, err)
		}
	}, 100*time.Millisecond)
}

func (s *configMapSync) once() error {
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, s.key, &cm); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	files := map[string]string{}
	if len(s.items) == 0 {
		for k, v := range cm.Data {
			files[k] = v
		}
	}
	for _, it := range s.items {
		v, ok := cm.Data[it.Key]
		if !ok {
			return fmt.Errorf("key %q is missing", it.Key)
		}
		files[it.Path] = v
	}
	if fmt.Sprint(files) == fmt.Sprint(s.last) {
		return nil
	}
	for name, v := range files {
		tmp := filepath.Join(s.dir, "."+strconv.Itoa(os.Getpid())+"."+filepath.Base(name))
		if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
			return err
		}
	}
	s.last = files
	return nil
}

// serviceAccountKubeconfig is a kubeconfig for the administrator that acts as
// the service account, so the account's RBAC is what the process gets.
func serviceAccountKubeconfig(ns, sa string) string {
	Expect(sa).NotTo(BeEmpty(), "the pod runs as the default service account")
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	Expect(err).NotTo(HaveOccurred())
	for _, a := range cfg.AuthInfos {
		a.Impersonate = serviceAccountUser(ns, sa)
	}
	data, err := clientcmd.Write(*cfg)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

// readBody reads and closes an HTTP body, for failure messages.
func readBody(r io.ReadCloser) string {
	defer r.Close()
	var b bytes.Buffer
	_, _ = io.Copy(&b, io.LimitReader(r, 4096))
	return b.String()
}
