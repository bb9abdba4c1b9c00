package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Per-endpoint gauges of igw's own, read from the store at scrape time.
const (
	EndpointQueueSize       = "igw_epp_endpoint_queue_size"
	EndpointRunningRequests = "igw_epp_endpoint_running_requests"
	EndpointKVCache         = "igw_epp_endpoint_kv_cache_utilization"
)

// EndpointLister lists the endpoints of the pool; *datastore.Store is one.
type EndpointLister interface {
	Endpoints(dst []*datastore.EndpointState) []*datastore.EndpointState
}

// poolCollector reports the pool's state as the picker sees it when
// Prometheus scrapes: the last telemetry sample of every endpoint (queue,
// running batch, KV-cache use) and the pool averages the inference extension
// exports. Reading at scrape time keeps the series exactly those of the
// endpoints that exist, with nothing to forget when one goes.
type poolCollector struct {
	mu    sync.Mutex
	pool  string
	store EndpointLister

	avgKV, avgQueue, avgRunning, readyPods, perPodQueue *prometheus.Desc
	queue, running, kv                                  *prometheus.Desc
}

func newPoolCollector() *poolCollector {
	pool := []string{LabelPoolName}
	return &poolCollector{
		avgKV:       prometheus.NewDesc(PoolAverageKVCache, "Mean KV-cache utilisation (0..1) over the pool's endpoints that report it.", pool, nil),
		avgQueue:    prometheus.NewDesc(PoolAverageQueueSize, "Mean number of requests waiting in the model servers' queues over the pool's endpoints.", pool, nil),
		avgRunning:  prometheus.NewDesc(PoolAverageRunningRequests, "Mean number of requests in the model servers' running batches over the pool's endpoints.", pool, nil),
		readyPods:   prometheus.NewDesc(PoolReadyPods, "Ready pods of the pool (an endpoint is a ready pod's target port).", pool, nil),
		perPodQueue: prometheus.NewDesc(PoolPerPodQueueSize, "Requests waiting in each model server's queue; model_server_pod is the endpoint's ip:port.", []string{LabelPoolName, LabelModelServerPod}, nil),
		queue:       prometheus.NewDesc(EndpointQueueSize, "Requests waiting in the endpoint's queue, from its last telemetry sample.", []string{"endpoint"}, nil),
		running:     prometheus.NewDesc(EndpointRunningRequests, "Requests in the endpoint's running batch, from its last telemetry sample.", []string{"endpoint"}, nil),
		kv:          prometheus.NewDesc(EndpointKVCache, "KV-cache utilisation (0..1) of the endpoint, from its last telemetry sample; absent while unknown.", []string{"endpoint"}, nil),
	}
}

// ObservePool makes the pool gauges report the endpoints of store under the
// pool name (the InferencePool, or empty with an endpoints file). Until it
// is called the averages read 0 and no endpoint series exist.
func (m *Metrics) ObservePool(pool string, store EndpointLister) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	m.pool.pool, m.pool.store = pool, store
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.avgKV, c.avgQueue, c.avgRunning, c.readyPods, c.perPodQueue, c.queue, c.running, c.kv} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pool, store := c.pool, c.store
	c.mu.Unlock()
	var states []*datastore.EndpointState
	if store != nil {
		states = store.Endpoints(nil)
	}
	now := time.Now()
	pods := map[string]struct{}{}
	var kvSum, queueSum, runningSum float64
	var kvN, sampled int
	var v datastore.View
	for _, st := range states {
		pods[st.Endpoint().Address] = struct{}{}
		st.View(now, 0, &v)
		if !v.HasMetrics {
			continue
		}
		sampled++
		waiting, running := float64(v.Metrics.Waiting), float64(v.Metrics.Running)
		queueSum += waiting
		runningSum += running
		ch <- prometheus.MustNewConstMetric(c.perPodQueue, prometheus.GaugeValue, waiting, pool, v.Key)
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, waiting, v.Key)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, running, v.Key)
		if v.Metrics.KVCacheKnown {
			kvSum += v.Metrics.KVCacheUsage
			kvN++
			ch <- prometheus.MustNewConstMetric(c.kv, prometheus.GaugeValue, v.Metrics.KVCacheUsage, v.Key)
		}
	}
	mean := func(sum float64, n int) float64 {
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	ch <- prometheus.MustNewConstMetric(c.avgKV, prometheus.GaugeValue, mean(kvSum, kvN), pool)
	ch <- prometheus.MustNewConstMetric(c.avgQueue, prometheus.GaugeValue, mean(queueSum, sampled), pool)
	ch <- prometheus.MustNewConstMetric(c.avgRunning, prometheus.GaugeValue, mean(runningSum, sampled), pool)
	ch <- prometheus.MustNewConstMetric(c.readyPods, prometheus.GaugeValue, float64(len(pods)), pool)
}
