package config

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/filewatch"
)

// Status is what the readiness endpoint says about the configuration.
type Status = filewatch.Status

// Watcher keeps a director's pipeline in step with a file (re-read on an
// interval, see filewatch). An invalid file keeps the last good pipeline.
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

	once sync.Once
	file *filewatch.File
}

func (w *Watcher) watched() *filewatch.File {
	w.once.Do(func() {
		w.file = &filewatch.File{Path: w.Path, Interval: w.Interval, What: "configuration",
			Log: w.Log, OnLoad: w.OnLoad, Now: w.Now,
			Apply: func(data []byte) error {
				p, err := Load(data, w.Registry)
				if err != nil {
					return err
				}
				w.Apply(p)
				return nil
			}}
	})
	return w.file
}

// Load reads the file once and applies it if it changed; the error says why
// the file on disk is not in effect.
func (w *Watcher) Load() error { return w.watched().Load() }

// Run re-reads the file every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.watched().Run(ctx) }

// Status returns the configuration's state.
func (w *Watcher) Status() Status { return w.watched().Status() }
