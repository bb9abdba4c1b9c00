package version

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binaries are the commands under cmd/ whose images and releases carry the version.
var binaries = []string{"manager", "epp", "bbr", "modelsim", "igw-gateway", "igw-bench-gateway", "igw-bench"}

// TestBinariesReportTheirVersion builds every binary with the version set the
// way `make build` and the Dockerfile set it, and runs --version (exit 0,
// the version printed) and --help (exit 0); the operator's default EPP and
// BBR images carry the version as their tag.
func TestBinariesReportTheirVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary")
	}
	const v = "9.8.7-test"
	dir := t.TempDir()
	// -s -w: no symbol table or DWARF, which shortens the seven links.
	build := exec.Command("go", "build", "-ldflags", "-s -w -X github.com/igw-dev/igw/internal/version.Version="+v, "-o", dir+"/", "../../cmd/...")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, b := range binaries {
		out, err := exec.Command(filepath.Join(dir, b), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), b+" "+v+" (go") {
			t.Errorf("%s --version: %v, output %q", b, err, out)
		}
		out, err = exec.Command(filepath.Join(dir, b), "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "version") {
			t.Errorf("%s --help: %v, output %q", b, err, out)
		}
		if b == "manager" {
			for _, image := range []string{"ghcr.io/igw-dev/igw-epp:" + v, "ghcr.io/igw-dev/igw-bbr:" + v} {
				if !strings.Contains(string(out), image) {
					t.Errorf("manager --help does not default to %s:\n%s", image, out)
				}
			}
		}
	}
}
