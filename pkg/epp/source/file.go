// Package source feeds the endpoint store: from a YAML file (standalone use,
// benchmarks) or from an InferencePool and its Pods in a cluster.
package source

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Store is the part of datastore.Store a source writes.
type Store interface {
	SetEndpoints([]datastore.Endpoint) (added, removed []string)
}

// ParseEndpoints reads an endpoints file: a YAML list of
//
//   - address: 10.0.0.7      # an IP address: the proxy dials it as is
//     port: 8000
//     labels: {gpu: h100}    # optional, for filters
func ParseEndpoints(data []byte) ([]datastore.Endpoint, error) {
	var eps []datastore.Endpoint
	if err := yaml.UnmarshalStrict(data, &eps); err != nil {
		return nil, fmt.Errorf("parse endpoints: %w", err)
	}
	seen := map[string]bool{}
	for i, ep := range eps {
		if net.ParseIP(ep.Address) == nil {
			return nil, fmt.Errorf("endpoints[%d]: address %q is not an IP address", i, ep.Address)
		}
		if ep.Port < 1 || ep.Port > 65535 {
			return nil, fmt.Errorf("endpoints[%d]: port %d is out of range", i, ep.Port)
		}
		if seen[ep.Key()] {
			return nil, fmt.Errorf("endpoints[%d]: %s is listed twice", i, ep.Key())
		}
		seen[ep.Key()] = true
	}
	return eps, nil
}

// File keeps a store in step with an endpoints file, re-read on an interval
// (a symlink-swapped ConfigMap defeats change notifications). An invalid file
// leaves the endpoints as they were.
type File struct {
	Path     string
	Interval time.Duration
	Store    Store
	Log      *slog.Logger
	last     []byte
}

// Load reads the file once, applying it if it changed.
func (f *File) Load() error {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return fmt.Errorf("read endpoints file: %w", err)
	}
	if f.last != nil && bytes.Equal(data, f.last) {
		return nil
	}
	f.last = data
	eps, err := ParseEndpoints(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	added, removed := f.Store.SetEndpoints(eps)
	if len(added)+len(removed) > 0 {
		f.log().Info("endpoints changed", "file", f.Path, "added", added, "removed", removed, "total", len(eps))
	}
	return nil
}

// Run reloads until ctx ends.
func (f *File) Run(ctx context.Context) {
	iv := f.Interval
	if iv <= 0 {
		iv = time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f.Load(); err != nil {
				f.log().Error("endpoints file rejected; keeping the current endpoints", "error", err)
			}
		}
	}
}

func (f *File) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.Default()
}
