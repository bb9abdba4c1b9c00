// Package configtest builds the pickers that tests schedule with: a director
// over a fresh store of the given endpoints, with a configuration.
package configtest

import (
	"testing"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// Director returns a director over a new store of eps (with the default
// timing priors) that schedules with the configuration yaml (config.Default
// when empty); a configuration config.NewDirector refuses fails t.
func Director(t testing.TB, yaml string, opts director.Options, eps ...datastore.Endpoint) *director.Director {
	t.Helper()
	store := datastore.NewStore(latency.DefaultPriors)
	store.SetEndpoints(eps)
	d, err := config.NewDirector(store, yaml, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
