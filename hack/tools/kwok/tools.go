//go:build tools

// Package tools pins kwok, which plays the test cluster's nodes: it marks Nodes
// ready and runs the Pods scheduled to them (status, IPs, deletion) without
// containers, so that Deployments, ReplicaSets, the scheduler and EndpointSlices
// in the tests are the real controllers' work.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
