// Package scenariotest loads benchmark scenarios in tests: a scenario that
// does not load fails the test at once, with the loader's error.
package scenariotest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// Load loads the scenario file at path (relative to the test's package).
func Load(t testing.TB, path string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// Parse parses yaml as the scenario file name.
func Parse(t testing.TB, name, yaml string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(yaml), name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// SmallPath is the path of bench/testdata/small.yaml, the small scenario the
// simulation tests share, wherever the test runs from.
func SmallPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "bench", "testdata", "small.yaml")
}

// Small loads bench/testdata/small.yaml.
func Small(t testing.TB) *scenario.Scenario {
	t.Helper()
	return Load(t, SmallPath())
}
