package scenario

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the YAML nodes one file may expand to (aliases included),
// so a hostile file cannot make the loader walk an exponential tree.
const maxNodes = 100_000

var (
	durationType = reflect.TypeFor[time.Duration]()
	kvTokensType = reflect.TypeFor[KVTokens]()
	quantityType = reflect.TypeFor[Quantity]()
)

// decoder walks yaml.v3 nodes into the scenario types by their yaml tags,
// rejecting keys the schema does not know, with the file and line.
type decoder struct {
	file  string
	nodes int
}

// decodeStrict fills out (a pointer to a struct) from the YAML document data.
func decodeStrict(data []byte, file string, out any) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", nameOr(file), err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return fmt.Errorf("%s: the scenario file is empty", nameOr(file))
	}
	d := &decoder{file: file}
	return d.decode(doc.Content[0], reflect.ValueOf(out).Elem(), "")
}

func nameOr(file string) string {
	if file == "" {
		return "scenario"
	}
	return file
}

func (d *decoder) errorf(n *yaml.Node, format string, a ...any) error {
	return fmt.Errorf("%s:%d: %s", nameOr(d.file), n.Line, fmt.Sprintf(format, a...))
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if d.nodes++; d.nodes > maxNodes {
		return d.errorf(n, "the file expands to more than %d YAML nodes", maxNodes)
	}
	if n.Kind == yaml.AliasNode {
		return d.decode(n.Alias, v, path)
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value keeps the default
	}
	switch v.Type() {
	case durationType:
		return d.scalar(n, path, func(s string) error {
			dur, err := parseDuration(s)
			if err == nil {
				v.SetInt(int64(dur))
			}
			return err
		})
	case kvTokensType:
		return d.scalar(n, path, func(s string) error {
			if strings.EqualFold(strings.TrimSpace(s), "auto") {
				v.SetInt(0)
				return nil
			}
			k, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || k <= 0 {
				return fmt.Errorf("want auto or a positive number of tokens")
			}
			v.SetInt(int64(k))
			return nil
		})
	case quantityType:
		return d.scalar(n, path, func(s string) error {
			q, err := parseQuantity(s)
			if err == nil {
				v.Set(reflect.ValueOf(q))
			}
			return err
		})
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	case reflect.Struct:
		return d.mapping(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.errorf(n, "%s: want a list", path)
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.String:
		return d.scalar(n, path, func(s string) error { v.SetString(s); return nil })
	case reflect.Int:
		return d.scalar(n, path, func(s string) error {
			i, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			v.SetInt(int64(i))
			return nil
		})
	case reflect.Float64:
		return d.scalar(n, path, func(s string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("want a number")
			}
			v.SetFloat(f)
			return nil
		})
	}
	return d.errorf(n, "%s: unsupported field type %s", path, v.Type())
}

func (d *decoder) scalar(n *yaml.Node, path string, set func(string) error) error {
	if n.Kind != yaml.ScalarNode {
		return d.errorf(n, "%s: want a single value", path)
	}
	if err := set(n.Value); err != nil {
		return d.errorf(n, "%s: %v, got %q", path, err, n.Value)
	}
	return nil
}

// mapping decodes a YAML mapping into struct v, key by key.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.errorf(n, "%s: want a mapping of keys", orTop(path))
	}
	fields := map[string]int{}
	var known []string
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		known = append(known, tag)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			return d.errorf(key, "%s: keys must be plain names", orTop(path))
		}
		idx, ok := fields[key.Value]
		if !ok {
			return d.errorf(key, "unknown key %q in %s (known: %s)", key.Value, orTop(path), strings.Join(known, ", "))
		}
		if seen[key.Value] {
			return d.errorf(key, "key %q appears twice in %s", key.Value, orTop(path))
		}
		seen[key.Value] = true
		child := key.Value
		if path != "" {
			child = path + "." + key.Value
		}
		if err := d.decode(val, v.Field(idx), child); err != nil {
			return err
		}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// parseDuration reads a Go duration; a bare 0 is allowed.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration such as 300s or 50ms")
	}
	return dur, nil
}

// parseQuantity reads a number, or a Go duration as seconds.
func parseQuantity(s string) (Quantity, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		return Q(f), nil
	}
	if dur, err := time.ParseDuration(s); err == nil {
		return Q(dur.Seconds()), nil
	}
	return Quantity{}, errors.New("want a number or a duration")
}
