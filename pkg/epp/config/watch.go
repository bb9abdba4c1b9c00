package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Status is what the readiness endpoint says about the configuration.
type Status struct {
	// Loaded is true once a configuration is in effect.
	Loaded bool `json:"loaded"`
	// Digest is the sha256 of the file in effect.
	Digest string `json:"digest,omitempty"`
	// Error is why the file on disk was rejected ("" when it is in effect).
	Error string `json:"error,omitempty"`
	// LoadedAt is when the configuration in effect was loaded.
	LoadedAt time.Time `json:"loadedAt,omitzero"`
}

// Watcher keeps a director's pipeline in step with a file. A mounted ConfigMap
// is updated by swapping a symlink, which file-change notifications on the
// file itself miss, so the watcher re-reads the path on an interval and
// compares the bytes. An invalid file keeps the last good pipeline.
type Watcher struct {
	Path     string
	Interval time.Duration
	Registry *scheduling.Registry
	Apply    func(*director.Pipeline)
	Log      *slog.Logger
	// OnLoad, when set, is told the result of every load of changed bytes.
	OnLoad func(err error, at time.Time)
	// Now is the wall clock (time.Now when nil).
	Now func() time.Time

	mu     sync.Mutex
	last   []byte
	status Status
}

// Load reads the file once and applies it if it changed; the error says why
// a changed file was rejected.
func (w *Watcher) Load() error {
	data, err := os.ReadFile(w.Path)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("read configuration %s: %w", w.Path, err)
		if w.status.Error != err.Error() {
			w.reject(err, now)
		}
		return err
	}
	if w.last != nil && bytes.Equal(data, w.last) {
		return nil
	}
	w.last = data
	p, err := Load(data, w.Registry)
	if err != nil {
		err = fmt.Errorf("configuration %s: %w", w.Path, err)
		w.reject(err, now)
		return err
	}
	w.Apply(p)
	sum := sha256.Sum256(data)
	w.status = Status{Loaded: true, Digest: hex.EncodeToString(sum[:]), LoadedAt: now}
	w.log().Info("configuration loaded", "path", w.Path, "digest", w.status.Digest[:12])
	if w.OnLoad != nil {
		w.OnLoad(nil, now)
	}
	return nil
}

func (w *Watcher) reject(err error, now time.Time) {
	w.status.Error = err.Error()
	if w.status.Loaded {
		w.log().Error("configuration rejected; keeping the last good one", "error", err, "inEffect", w.status.Digest[:12])
	} else {
		w.log().Error("configuration rejected and none is in effect", "error", err)
	}
	if w.OnLoad != nil {
		w.OnLoad(err, now)
	}
}

// Run re-reads the file every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	iv := w.Interval
	if iv <= 0 {
		iv = 250 * time.Millisecond
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.Load()
		}
	}
}

// Status returns the configuration's state.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Watcher) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}
