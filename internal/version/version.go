// Package version is the version of igw's binaries and of the images the
// operator runs: one string, set at build time, that every binary prints with
// --version and that tags the endpoint picker and body-based router images the
// operator deploys by default, so that operator, EPP and BBR of one release
// run together.
package version

import (
	"fmt"
	"runtime"
)

// Default is the release this tree builds. The Makefile's VERSION, the
// Dockerfile's VERSION argument and the Helm chart's appVersion are kept equal
// to it (version_test.go checks).
const Default = "0.1.0"

// Version is the version this binary was built as: Default unless the build
// set another, as `make build` and the Dockerfile do:
//
//	go build -ldflags "-X github.com/igw-dev/igw/internal/version.Version=1.2.3" ./cmd/...
var Version = Default

// FlagUsage is the help text of every binary's --version flag.
const FlagUsage = "print the version and exit"

// String is the line --version prints: the command, the version and the Go
// release that built it.
func String(command string) string {
	return fmt.Sprintf("%s %s (%s)", command, Version, runtime.Version())
}
