package live

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/igw-dev/igw/internal/proc"
)

// gatewayCommand is the gateway a live run starts: the standalone gateway
// with the benchmark's baselines registered (pkg/bench/livegateway).
const gatewayCommand = "igw-bench-gateway"

// binaries are the commands a live run starts.
type binaries struct {
	modelsim, gateway string
}

// findBinaries locates modelsim and igw-bench-gateway: in dir when it is given,
// else as Binary finds them.
func findBinaries(dir string) (binaries, error) {
	find := Binary
	if dir != "" {
		find = func(name string) (string, error) { return proc.InDir(dir, name) }
	}
	var b binaries
	var err error
	if b.modelsim, err = find("modelsim"); err != nil {
		return b, err
	}
	b.gateway, err = find(gatewayCommand)
	return b, err
}

// Binary returns the path of one of the repository's commands (modelsim,
// igw-bench-gateway): the file beside the running executable when there is one
// (bin/ after `make build`), else a build of ./cmd/NAME from the module the
// working directory is in (built once per process, so never stale), else
// NAME on the PATH.
func Binary(name string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p, err := proc.InDir(filepath.Dir(exe), name); err == nil {
			return p, nil
		}
	}
	built, berr := proc.Build(name)
	if berr == nil {
		return built, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", berr
}
