// Package source feeds the endpoint store: from a YAML file (standalone use,
// benchmarks) or from an InferencePool and its Pods in a cluster.
package source

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/filewatch"
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
// (see filewatch: a symlink-swapped ConfigMap defeats change notifications).
// An invalid file leaves the endpoints as they were.
type File struct {
	Path     string
	Interval time.Duration // filewatch.DefaultInterval when 0
	Store    Store
	Log      *slog.Logger

	once sync.Once
	file *filewatch.File
}

func (f *File) watched() *filewatch.File {
	f.once.Do(func() {
		f.file = &filewatch.File{Path: f.Path, Interval: f.Interval, What: "endpoints file", Log: f.Log,
			Apply: filewatch.Parsed(ParseEndpoints, func(eps []datastore.Endpoint) {
				added, removed := f.Store.SetEndpoints(eps)
				if len(added)+len(removed) > 0 {
					f.file.Log.Info("endpoints changed", "file", f.Path, "added", added, "removed", removed, "total", len(eps))
				}
			})}
		if f.file.Log == nil {
			f.file.Log = slog.Default()
		}
	})
	return f.file
}

// Load reads the file once and applies it if it changed; the error says why
// the file on disk is not in effect.
func (f *File) Load() error { return f.watched().Load() }

// Run re-reads the file every interval until ctx ends.
func (f *File) Run(ctx context.Context) { f.watched().Run(ctx) }

// Status is what a readiness endpoint says about the file.
func (f *File) Status() filewatch.Status { return f.watched().Status() }
