// Package golden compares test output with files checked into testdata, and
// rewrites them when a test binary runs with -update. A mismatch is reported as
// a full unified diff, so a reviewer sees every changed line at once.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the tests produce")

// T is the part of testing.TB (and of Ginkgo's GinkgoT()) that Check uses.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check compares got with the file at path. With -update it writes got there
// instead (creating the directory), so the change shows in version control.
func Check(t T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (rerun the test with -update to create it)", err)
		return
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from what the test produced (rerun with -update if the change is intended):\n%s",
			path, Diff(path, path+" (got)", string(want), string(got)))
	}
}
