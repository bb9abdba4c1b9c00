package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

// podStartTimeout bounds the wait for kube-scheduler and kwok to run a Pod
// or change its readiness: generous, as they share two cores with the tests,
// and kwok's watch backs off for most of a minute after an outage of the
// API server.
const podStartTimeout = 2 * time.Minute

// StartSimulator plays the container runtime for Pod ns/name, which kwok
// runs (Nodes): once the Pod has its IP it starts a model server simulator
// (cmd/modelsim, stopped at t's cleanup) listening on that IP and port, and
// then lets the Pod's readiness probe pass (SetReadinessProbe), so that the
// Pod turns Ready only once its server answers; it returns once the Pod is
// Ready.
func StartSimulator(ctx context.Context, t simproc.TB, c client.Client, ns, name string, port int, opts simproc.Options) (*simproc.Proc, error) {
	t.Helper()
	ip, err := WaitForPodIP(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	opts.Host, opts.Port = ip, port
	p := simproc.Start(t, opts)
	if err := SetReadinessProbe(ctx, c, ns, name, true); err != nil {
		return nil, err
	}
	return p, WaitForPodReady(ctx, c, ns, name, true)
}

// WaitForPodIP waits until kwok has started Pod ns/name and returns its IP.
func WaitForPodIP(ctx context.Context, c client.Client, ns, name string) (string, error) {
	p, err := waitForPod(ctx, c, ns, name, "get an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	return p.Status.PodIP, err
}

// WaitForPodReady waits until Pod ns/name is Ready, or not Ready, as kwok
// reports it.
func WaitForPodReady(ctx context.Context, c client.Client, ns, name string, ready bool) error {
	what := "turn Ready"
	if !ready {
		what = "turn not Ready"
	}
	_, err := waitForPod(ctx, c, ns, name, what, func(p *corev1.Pod) bool { return IsPodReady(p) == ready })
	return err
}

// IsPodReady says whether the Pod's Ready condition is True.
func IsPodReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// DeploymentAvailable is nil once the deployment controller reports every
// replica of d, as it is now, updated and available; otherwise an error
// that says how far the rollout is.
func DeploymentAvailable(d *appsv1.Deployment) error {
	want := ptr.Deref(d.Spec.Replicas, 1)
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want {
		return fmt.Errorf("deployment %s/%s: generation %d observed %d, %d of %d updated and %d available", d.Namespace, d.Name,
			d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas)
	}
	return nil
}

func waitForPod(ctx context.Context, c client.Client, ns, name, what string, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, podStartTimeout)
	defer cancel()
	for {
		var p corev1.Pod
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p)
		if err == nil && ok(&p) {
			return &p, nil
		}
		select {
		case <-ctx.Done():
			return &p, fmt.Errorf("pod %s/%s: waited %v for it to %s (phase %q, node %q, conditions %v, last error %v)",
				ns, name, podStartTimeout, what, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TB is the part of testing.TB RunSimulators needs; Ginkgo's GinkgoT() has it too.
type TB interface {
	simproc.TB
	Errorf(format string, args ...any)
}

// RunSimulators plays the container runtime for every Pod of namespace ns
// matching selector, as kwok runs them (created by a ReplicaSet, say): once
// a Pod has its IP it starts a simulator there on port, with the options
// optionsFor gives the Pod, lets the Pod's readiness probe pass, and stops
// the simulator when the Pod is gone. All stop at t's cleanup.
func RunSimulators(t TB, c client.Client, ns string, selector map[string]string, port int, optionsFor func(*corev1.Pod) simproc.Options) {
	t.Helper()
	bin := simproc.Binary(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sims := map[types.UID]*proc.Proc{}
	t.Cleanup(func() {
		cancel()
		<-done
		for _, s := range sims {
			s.Stop()
		}
	})
	go func() {
		defer close(done)
		// failingSince is when starting a Pod's simulator first failed: its
		// address may still be held a moment (by the simulator of a Pod that
		// had the IP before, or by another process that took the port), so
		// a start is retried for launchRetry before the test fails.
		failingSince := map[types.UID]time.Time{}
		for ; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
			var pods corev1.PodList
			if c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(selector)) != nil {
				continue
			}
			// Simulators of Pods gone or going stop first: kwok gives a
			// deleted Pod's IP to the next one.
			running := map[types.UID]bool{}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.DeletionTimestamp == nil {
					running[p.UID] = true
				}
			}
			for uid, s := range sims {
				if !running[uid] {
					s.Stop()
					delete(sims, uid)
				}
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if sims[p.UID] != nil || p.Status.PodIP == "" || !running[p.UID] {
					continue
				}
				opts := optionsFor(p)
				opts.Host, opts.Port = p.Status.PodIP, port
				s, err := simproc.Launch(bin, opts)
				if err != nil {
					first, seen := failingSince[p.UID]
					switch {
					case !seen:
						failingSince[p.UID] = time.Now()
					case time.Since(first) > launchRetry:
						t.Errorf("starting the simulator of Pod %s on %s (tried for %v): %v", p.Name, p.Status.PodIP, launchRetry, err)
						failingSince[p.UID] = time.Now() // once a retry period, not every tick
					}
					continue
				}
				delete(failingSince, p.UID)
				sims[p.UID] = s
				if err := SetReadinessProbe(ctx, c, ns, p.Name, true); err != nil && ctx.Err() == nil {
					t.Errorf("letting the readiness probe of Pod %s pass: %v", p.Name, err)
				}
			}
		}
	}()
}

// launchRetry is how long RunSimulators retries starting a Pod's simulator.
const launchRetry = 10 * time.Second

// PodPort is a port for the servers a test runs on kwok's Pod IPs (a
// route's target port, the same on every Pod). It lies below the system's
// ephemeral range, where the port-0 listeners and outbound connections of
// every other process on the machine take theirs: a port drawn from that
// range and released, as a free-port helper's is, was taken by another
// process's wildcard listener before the last Pod's simulator bound it. It
// is free on every interface when drawn.
func PodPort(t interface{ Fatalf(string, ...any) }) int {
	const low, high = 20000, 32000 // Linux's ephemeral range starts at 32768
	for range 100 {
		port := low + rand.IntN(high-low)
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err == nil {
			_ = l.Close()
			return port
		}
	}
	t.Fatalf("no free port in [%d, %d) after 100 draws", low, high)
	return 0
}
