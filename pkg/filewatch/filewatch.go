// Package filewatch keeps a component in step with a file that changes while
// the process runs, typically a ConfigMap key mounted as a volume.
//
// The kubelet updates such a volume by writing a new directory and atomically
// swapping the "..data" symlink onto it; the file itself is never written in
// place, so change notifications on the file miss the update. A File therefore
// re-reads its path on an interval and compares the bytes: cheap for the small
// files it is meant for, and correct for every way the file can be replaced.
// A file that is missing or rejected keeps what was last put into effect.
package filewatch

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/igw-dev/igw/internal/clock"
)

// DefaultInterval is the poll interval when File.Interval is not set.
const DefaultInterval = 250 * time.Millisecond

// Status is what a readiness endpoint says about the file.
type Status struct {
	// Loaded is true once a version of the file is in effect.
	Loaded bool `json:"loaded"`
	// Digest is the sha256 of the version in effect.
	Digest string `json:"digest,omitempty"`
	// Error is why the file on disk is not in effect ("" when it is).
	Error string `json:"error,omitempty"`
	// LoadedAt is when the version in effect was loaded.
	LoadedAt time.Time `json:"loadedAt,omitzero"`
}

// File applies a file's content whenever it changes.
type File struct {
	Path     string
	Interval time.Duration
	// What names the file in errors and logs ("configuration", "adapter mapping").
	What string
	// Apply parses data and puts it into effect. An error means nothing changed:
	// what is in effect stays, and the error is reported.
	Apply func(data []byte) error
	Log   *slog.Logger
	// OnLoad, when set, is told the result of every load of changed bytes and
	// of every new read failure.
	OnLoad func(err error, at time.Time)
	// Now is the wall clock (time.Now when nil).
	Now func() time.Time
	// Read, when set, reads the content in place of reading Path: for a
	// content made of several files that must change together (a certificate
	// and its key), Path then only names it in errors and logs.
	Read func() ([]byte, error)

	mu      sync.Mutex
	last    []byte // the bytes last given to Apply
	lastErr error  // what Apply said of them
	status  Status
}

// Parsed is an Apply that reads the file with parse and puts the result into
// effect with apply; a parse error changes nothing.
func Parsed[T any](parse func([]byte) (T, error), apply func(T)) func([]byte) error {
	return func(data []byte) error {
		v, err := parse(data)
		if err != nil {
			return err
		}
		apply(v)
		return nil
	}
}

// Load reads the file once and applies it if it changed. The error says why the
// file on disk is not in effect; an unchanged file gets the same answer as before.
func (f *File) Load() error {
	read := f.Read
	if read == nil {
		read = func() ([]byte, error) { return os.ReadFile(f.Path) }
	}
	data, err := read()
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("read %s %s: %w", f.What, f.Path, err)
		if f.status.Error != err.Error() {
			f.reject(err, now)
		}
		return err
	}
	if f.last != nil && bytes.Equal(data, f.last) {
		if f.lastErr == nil {
			f.status.Error = "" // the file is back as it was when applied
		}
		return f.lastErr
	}
	f.last = data
	if err := f.Apply(data); err != nil {
		f.lastErr = fmt.Errorf("%s %s: %w", f.What, f.Path, err)
		f.reject(f.lastErr, now)
		return f.lastErr
	}
	f.lastErr = nil
	sum := sha256.Sum256(data)
	f.status = Status{Loaded: true, Digest: hex.EncodeToString(sum[:]), LoadedAt: now}
	f.log().Info(f.What+" loaded", "path", f.Path, "digest", f.status.Digest[:12])
	if f.OnLoad != nil {
		f.OnLoad(nil, now)
	}
	return nil
}

func (f *File) reject(err error, now time.Time) {
	f.status.Error = err.Error()
	if f.status.Loaded {
		f.log().Error(f.What+" rejected; keeping the last good one", "error", err, "inEffect", f.status.Digest[:12])
	} else {
		f.log().Error(f.What+" rejected and none is in effect", "error", err)
	}
	if f.OnLoad != nil {
		f.OnLoad(err, now)
	}
}

// Run re-reads the file every interval until ctx ends.
func (f *File) Run(ctx context.Context) {
	iv := f.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = f.Load()
		}
	}
}

// Status returns the file's state.
func (f *File) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *File) now() time.Time { return clock.Now(f.Now) }

func (f *File) log() *slog.Logger { return cmp.Or(f.Log, slog.Default()) }
