package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// decodeStrict fills s from the first YAML document of data. yaml.v3 does the
// decoding by the yaml tags of the schema's types, refusing any key they do not
// name (KnownFields), so a new key is a new tagged field and nothing else;
// scalars the schema reads its own way implement yaml.Unmarshaler and report
// through scalarError. yaml.v3's messages are rewritten as FILE:LINE: ..., an
// unknown key with the keys known there, all of them at once.
func decodeStrict(data []byte, file string, s *Scenario) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(s)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: the scenario file is empty", nameOr(file))
	}
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", nameOr(file), err) // a syntax error, with its line
	}
	var errs []error
	if te != nil {
		for _, msg := range te.Errors {
			if e := explain(nameOr(file), msg); e != nil {
				errs = append(errs, e)
			}
		}
	}
	return errors.Join(append(errs, fractions(data, nameOr(file)))...)
}

func nameOr(file string) string {
	if file == "" {
		return "scenario"
	}
	return file
}

// scalarError is how a yaml.Unmarshaler of the schema refuses node: yaml.v3
// gathers it with the other errors of the document and goes on.
func scalarError(n *yaml.Node, want string) error {
	got := strconv.Quote(n.Value)
	switch n.Kind {
	case yaml.MappingNode:
		got = "a mapping"
	case yaml.SequenceNode:
		got = "a list"
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want %s, got %s", n.Line, want, got)}}
}

// The lines of a yaml.TypeError (yaml.v3's decode.go spells them so).
var (
	lineMessage = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownKey  = regexp.MustCompile(`^field (.+) not found in type (\S+)$`)
	repeatedKey = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	wrongType   = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// explain rewrites one line of a yaml.TypeError; nil drops it.
func explain(file, msg string) error {
	m := lineMessage.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: %s", file, msg)
	}
	at, msg := file+":"+m[1], m[2]
	if m := unknownKey.FindStringSubmatch(msg); m != nil {
		if k, ok := schema().mappings[m[2]]; ok {
			return fmt.Errorf("%s: unknown key %q in %s (known: %s)", at, m[1], strings.Join(k.paths, " or "), strings.Join(k.keys, ", "))
		}
		return fmt.Errorf("%s: unknown key %q", at, m[1])
	}
	if m := repeatedKey.FindStringSubmatch(msg); m != nil {
		key, _ := strconv.Unquote(m[1])
		return fmt.Errorf("%s: key %q appears twice (first at line %s)", at, key, m[2])
	}
	if m := wrongType.FindStringSubmatch(msg); m != nil {
		tag, value, into := m[1], m[2], m[3]
		if into == "time.Duration" && tag == "!!int" && value == "0" {
			// yaml.v3 takes no integer for a duration, but a bare 0 means one
			// unambiguously, and the field it refused keeps its zero value.
			return nil
		}
		got := strconv.Quote(value)
		switch tag {
		case "!!map":
			got = "a mapping"
		case "!!seq":
			got = "a list"
		}
		return fmt.Errorf("%s: want %s, got %s", at, describe(into), got)
	}
	return fmt.Errorf("%s: %s", at, msg)
}

// describe names what a Go type of the schema takes in the file's words.
func describe(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 300s or 50ms"
	case goType == "int":
		return "an integer"
	case goType == "float64":
		return "a number"
	case goType == "string":
		return "a single value"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	if _, ok := schema().mappings[goType]; ok {
		return "a mapping of keys"
	}
	return goType
}

// fractions reports the fractional numbers given to whole-number keys, which
// yaml.v3 would truncate (replicas: 1.5 would be 1 replica).
func fractions(data []byte, file string) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil // a syntax error, which the decoder reported
	}
	whole := schema().wholeNumberKeys
	var errs []error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			key, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			var f float64
			if whole[key.Value] && v.ShortTag() == "!!float" && v.Decode(&f) == nil && f != math.Trunc(f) {
				errs = append(errs, fmt.Errorf("%s:%d: want an integer, got %q", file, v.Line, v.Value))
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return errors.Join(errs...)
}

// mappingKeys are the keys one struct type of the schema takes and where it
// stands in the file.
type mappingKeys struct {
	keys  []string
	paths []string
}

// schemaInfo is what the error messages need to know of the schema.
type schemaInfo struct {
	// mappings maps each struct type reachable from Scenario (by the name
	// yaml.v3 gives it in errors) to its keys.
	mappings map[string]*mappingKeys
	// wholeNumberKeys are the keys that take an integer wherever they stand.
	wholeNumberKeys map[string]bool
}

// schema reads the yaml tags of the types reachable from Scenario.
var schema = sync.OnceValue(func() schemaInfo {
	info := schemaInfo{mappings: map[string]*mappingKeys{}, wholeNumberKeys: map[string]bool{}}
	notWhole := map[string]bool{}
	unmarshaler := reflect.TypeFor[yaml.Unmarshaler]()
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) {
			return
		}
		if path == "" {
			path = "the top level"
		}
		k, seen := info.mappings[t.String()]
		if !seen {
			k = &mappingKeys{}
			info.mappings[t.String()] = k
		}
		k.paths = append(k.paths, path)
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !seen {
				k.keys = append(k.keys, name)
			}
			if f.Type.Kind() == reflect.Int && !reflect.PointerTo(f.Type).Implements(unmarshaler) {
				info.wholeNumberKeys[name] = true
			} else {
				notWhole[name] = true
			}
			child := name
			if path != "the top level" {
				child = path + "." + name
			}
			walk(f.Type, child)
		}
	}
	walk(reflect.TypeFor[Scenario](), "")
	for name := range notWhole {
		delete(info.wholeNumberKeys, name)
	}
	return info
})

// readScalar gives read the node's trimmed value; a mapping, a list or a
// value read refuses is an error saying what was wanted.
func readScalar(n *yaml.Node, want string, read func(string) bool) error {
	if n.Kind != yaml.ScalarNode || !read(strings.TrimSpace(n.Value)) {
		return scalarError(n, want)
	}
	return nil
}

// UnmarshalYAML reads kvCacheTokens: auto (0) or a positive number of tokens.
func (k *KVTokens) UnmarshalYAML(n *yaml.Node) error {
	return readScalar(n, "auto or a positive number of tokens", func(s string) bool {
		if strings.EqualFold(s, "auto") {
			*k = 0
			return true
		}
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return false
		}
		*k = KVTokens(v)
		return true
	})
}

// UnmarshalYAML reads a number, or a Go duration as seconds.
func (q *Quantity) UnmarshalYAML(n *yaml.Node) error {
	return readScalar(n, "a number or a duration", func(s string) bool {
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			*q = Q(f)
			return true
		}
		if d, err := time.ParseDuration(s); err == nil {
			*q = Q(d.Seconds())
			return true
		}
		return false
	})
}
