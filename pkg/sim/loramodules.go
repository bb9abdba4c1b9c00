package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// LoRAModule is an adapter the server knows by name.
type LoRAModule struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// BaseModelName is the served name it applies to; empty means the first.
	BaseModelName string `json:"base_model_name,omitempty"`
}

// LoRAModules is the --lora-modules flag. Like vLLM's, a value is either
// name=path pairs or a JSON object (or, here, an array of them).
type LoRAModules []LoRAModule

func (m *LoRAModules) String() string {
	parts := make([]string, len(*m))
	for i, mod := range *m {
		parts[i] = mod.Name + "=" + mod.Path
	}
	return strings.Join(parts, " ")
}

// Set parses one flag value and appends its adapters.
func (m *LoRAModules) Set(v string) error {
	mods, err := ParseLoRAModules(v)
	if err != nil {
		return err
	}
	for _, mod := range mods {
		for _, have := range *m {
			if have.Name == mod.Name {
				return fmt.Errorf("adapter %q given twice", mod.Name)
			}
		}
		*m = append(*m, mod)
	}
	return nil
}

// ParseLoRAModules reads `name=path [name=path ...]` (separated by spaces or
// commas), a JSON object {"name","path","base_model_name"} or a JSON array of them.
func ParseLoRAModules(v string) ([]LoRAModule, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, errors.New("empty --lora-modules value")
	}
	var mods []LoRAModule
	switch v[0] {
	case '{':
		var mod LoRAModule
		if err := strictJSON(v, &mod); err != nil {
			return nil, fmt.Errorf("--lora-modules JSON: %w", err)
		}
		mods = []LoRAModule{mod}
	case '[':
		if err := strictJSON(v, &mods); err != nil {
			return nil, fmt.Errorf("--lora-modules JSON: %w", err)
		}
	default:
		for _, pair := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
			name, path, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("--lora-modules entry %q is not name=path", pair)
			}
			mods = append(mods, LoRAModule{Name: name, Path: path})
		}
	}
	seen := map[string]bool{}
	for _, mod := range mods {
		if mod.Name == "" || mod.Path == "" {
			return nil, fmt.Errorf("--lora-modules entry %+v needs a name and a path", mod)
		}
		if strings.ContainsAny(mod.Name, ",\n\"") {
			// Adapter names are joined with commas in lora_requests_info labels.
			return nil, fmt.Errorf("adapter name %q may not contain commas, quotes or newlines", mod.Name)
		}
		if seen[mod.Name] {
			return nil, fmt.Errorf("adapter %q given twice", mod.Name)
		}
		seen[mod.Name] = true
	}
	return mods, nil
}

// strictJSON decodes one JSON value with no unknown fields and nothing after it.
func strictJSON(s string, into any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
