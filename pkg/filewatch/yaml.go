package filewatch

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"
)

// StrictYAML reads an operator-rendered YAML file of schema F and returns the
// part of it take picks, once check accepts it. Unknown fields are errors, so
// a broken render is noticed instead of silently routing wrong. So are an
// empty file, as a file caught half-written must not wipe what is in use
// (empty says how to write one that is empty on purpose), and a file without
// its key (take reports it missing; key names it).
func StrictYAML[F, T any](data []byte, empty, key string, take func(F) (T, bool), check func(T) error) (T, error) {
	var zero T
	if len(bytes.TrimSpace(data)) == 0 {
		return zero, fmt.Errorf("the file is empty (write %s)", empty)
	}
	var file F
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return zero, err
	}
	v, ok := take(file)
	if !ok {
		return zero, fmt.Errorf("the file has no %s", key)
	}
	if err := check(v); err != nil {
		return zero, err
	}
	return v, nil
}
