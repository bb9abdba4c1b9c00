package source

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

func TestParseEndpoints(t *testing.T) {
	eps, err := ParseEndpoints([]byte("- {address: 10.0.0.1, port: 8000, labels: {gpu: h100}}\n- address: '::1'\n  port: 9000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].Key() != "10.0.0.1:8000" || eps[0].Labels["gpu"] != "h100" || eps[1].Key() != "[::1]:9000" {
		t.Fatalf("%+v", eps)
	}
	for name, bad := range map[string]string{
		"hostname":  "- {address: pod.local, port: 1}",
		"port":      "- {address: 10.0.0.1, port: 0}",
		"duplicate": "- {address: 10.0.0.1, port: 1}\n- {address: 10.0.0.1, port: 1}",
		"unknown":   "- {address: 10.0.0.1, port: 1, weight: 3}",
		"not list":  "address: 10.0.0.1",
	} {
		if _, err := ParseEndpoints([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFileReloadKeepsEndpointsOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	store := datastore.NewStore(latency.DefaultPriors)
	f := &File{Path: path, Store: store}
	os.WriteFile(path, []byte("- {address: 10.0.0.1, port: 8000}\n- {address: 10.0.0.2, port: 8000}\n"), 0o644)
	if err := f.Load(); err != nil || store.Len() != 2 {
		t.Fatalf("load: %v, %d endpoints", err, store.Len())
	}
	os.WriteFile(path, []byte("- {address: nonsense, port: 8000}\n"), 0o644)
	if err := f.Load(); err == nil || store.Len() != 2 {
		t.Fatalf("invalid file: %v, %d endpoints", err, store.Len())
	}
	// Read again unchanged, it is still not in effect, and says so.
	if err := f.Load(); err == nil || f.Status().Error == "" || !f.Status().Loaded {
		t.Fatalf("invalid file read again: %v, status %+v", err, f.Status())
	}
	os.WriteFile(path, []byte("- {address: 10.0.0.2, port: 8000}\n"), 0o644)
	if err := f.Load(); err != nil || store.Len() != 1 || store.Get("10.0.0.2:8000") == nil {
		t.Fatalf("reload: %v, %d endpoints", err, store.Len())
	}
}

func FuzzParseEndpoints(f *testing.F) {
	f.Add([]byte("- {address: 10.0.0.1, port: 8000, labels: {a: b}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		eps, err := ParseEndpoints(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, ep := range eps {
			if ep.Port < 1 || ep.Port > 65535 || seen[ep.Key()] {
				t.Fatalf("accepted %+v", ep)
			}
			seen[ep.Key()] = true
		}
	})
}
