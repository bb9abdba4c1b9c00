// Package loadfile reads a file and hands its bytes to a parser, so that a
// parse error names the file it came from.
package loadfile

import (
	"fmt"
	"os"
)

// Parse reads path and returns parse's result; parse's error is prefixed
// with path, a read error is returned as os.ReadFile gives it (it names the
// path already).
func Parse[T any](path string, parse func([]byte) (T, error)) (T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(data)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
