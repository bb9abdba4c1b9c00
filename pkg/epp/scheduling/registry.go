package scheduling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Parameters are a plugin's parameters as JSON (the configuration's YAML is
// converted first). Empty means defaults.
type Parameters []byte

// Decode fills into from the parameters, rejecting unknown fields so that a
// typo in the configuration is an error rather than a silent default.
func (p Parameters) Decode(into any) error {
	if len(bytes.TrimSpace(p)) == 0 || string(bytes.TrimSpace(p)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("parameters: %w", err)
	}
	return nil
}

// Factory builds a plugin instance named name from its parameters.
type Factory func(name string, params Parameters) (Plugin, error)

// WithParameters is the factory of a plugin type whose parameters decode into
// a P: the given parameters are decoded over a copy of defaults (unknown
// fields are errors; the copy is shallow, so defaults should hold no maps or
// slices a decode could write into) and build makes the instance, checking
// the values it needs checked.
func WithParameters[P any](typ string, defaults P, build func(n Named, p P) (Plugin, error)) Factory {
	return func(name string, params Parameters) (Plugin, error) {
		p := defaults
		if err := params.Decode(&p); err != nil {
			return nil, err
		}
		return build(Named{TypeName: typ, InstanceName: name}, p)
	}
}

// NoParameters is the factory of a plugin type that takes no parameters: it
// rejects any that are given and builds the instance with build.
func NoParameters(typ string, build func(Named) Plugin) Factory {
	return WithParameters(typ, struct{}{}, func(n Named, _ struct{}) (Plugin, error) { return build(n), nil })
}

// Registry maps type names to factories.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns a registry holding the factories of sets (none: an
// empty registry).
func NewRegistry(sets ...map[string]Factory) *Registry {
	r := &Registry{factories: make(map[string]Factory)}
	for _, set := range sets {
		r.RegisterAll(set)
	}
	return r
}

// Register adds a factory; registering a type twice is a programming error.
func (r *Registry) Register(typ string, f Factory) {
	if _, dup := r.factories[typ]; dup {
		panic("scheduling: plugin type registered twice: " + typ)
	}
	r.factories[typ] = f
}

// RegisterAll registers every factory of a table keyed by type name.
func (r *Registry) RegisterAll(factories map[string]Factory) {
	for typ, f := range factories {
		r.Register(typ, f)
	}
}

// New builds a plugin of type typ.
func (r *Registry) New(typ, name string, params Parameters) (Plugin, error) {
	f, ok := r.factories[typ]
	if !ok {
		return nil, fmt.Errorf("unknown plugin type %q (known: %v)", typ, r.Types())
	}
	if name == "" {
		name = typ
	}
	p, err := f(name, params)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
	}
	return p, nil
}

// Types lists the registered type names, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.factories))
	for t := range r.factories {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Named is embedded by plugins to answer Type and Name.
type Named struct {
	TypeName     string
	InstanceName string
}

// Type returns the type name.
func (n Named) Type() string { return n.TypeName }

// Name returns the instance name.
func (n Named) Name() string { return n.InstanceName }
