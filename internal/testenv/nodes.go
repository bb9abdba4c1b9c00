package testenv

import (
	_ "embed"
	"os"
	"path/filepath"
)

// Nodes are the cluster's nodes, played by kwok: a Node carrying
// NodeAnnotation is marked ready, and a Pod kube-scheduler binds to it runs
// at once (Running and Ready, an IP from PodCIDR) without a container, and
// goes when deleted. A test plays the container runtime: it starts what the
// Pod would run on the Pod's IP (PodCIDR on loopback, 127.0.0.0/8, makes
// every Pod IP one a local process can listen on).
type Nodes struct {
	// PodCIDR is where Pod IPs come from (kwok allocates them in order).
	PodCIDR string
}

// NodeAnnotation marks the Nodes kwok plays; NewNode's Nodes carry it.
const NodeAnnotation = "kwok.x-k8s.io/node"

// kwokStages are the lifecycle kwok gives Nodes and Pods: a node ready with
// room for every Pod; a Pod scheduled to it running and ready with an IP; a
// Pod being deleted removed.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// startNodes runs kube-scheduler and kwok.
func (e *Env) startNodes(n Nodes) error {
	if err := e.startComponent("kube-scheduler", "--leader-elect=false", "--secure-port=0", "--v=1"); err != nil {
		return err
	}
	stages := filepath.Join(e.tmp, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	return e.startComponent("kwok", "--config="+stages, "--cidr="+n.PodCIDR,
		"--manage-nodes-with-annotation-selector="+NodeAnnotation+"=fake", "--node-ip=127.0.0.1",
		"--server-address=", "--node-lease-duration-seconds=40", "--v=WARN")
}
