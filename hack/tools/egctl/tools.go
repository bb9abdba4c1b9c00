//go:build tools

// Package tools pins Envoy Gateway's egctl, whose `x translate` runs the real
// Envoy Gateway translator offline in the operator's tests.
package tools

import (
	_ "github.com/envoyproxy/gateway/cmd/egctl"
)
