package config

import (
	"fmt"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
)

// NewDirector returns a director over store that schedules with the
// configuration yaml (Default when empty), its plugins built from the
// standard registry: the picker that in-process users (the standalone
// gateway without a configuration file, the benchmark, tests) run. A picker
// whose configuration reloads sets its pipeline from a Watcher instead.
func NewDirector(store *datastore.Store, yaml string, opts director.Options) (*director.Director, error) {
	if yaml == "" {
		yaml = Default
	}
	pipeline, err := Load([]byte(yaml), plugins.NewRegistry())
	if err != nil {
		return nil, fmt.Errorf("epp configuration: %w", err)
	}
	d := director.New(store, opts)
	d.SetPipeline(pipeline)
	return d, nil
}
