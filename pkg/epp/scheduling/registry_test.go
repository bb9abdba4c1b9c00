package scheduling

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

type stub struct {
	Named
	limit int
}

type stubParameters struct {
	Fail  bool `json:"fail"`
	Limit int  `json:"limit"`
}

var stubFactory = WithParameters("stub", stubParameters{Limit: 3}, func(n Named, p stubParameters) (Plugin, error) {
	if p.Fail {
		return nil, errors.New("asked to fail")
	}
	return &stub{Named: n, limit: p.Limit}, nil
})

// Parameters decode over the defaults; one instance's values do not become
// the next one's defaults.
func TestWithParametersStartsFromTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   int
	}{{"", 3}, {`{"limit": 5}`, 5}, {`{"fail": false}`, 3}, {"null", 3}} {
		p, err := stubFactory("s", Parameters(tc.params))
		if err != nil || p.(*stub).limit != tc.want || p.Name() != "s" || p.Type() != "stub" {
			t.Errorf("%q: %+v, %v; want limit %d", tc.params, p, err, tc.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.Register("stub", stubFactory)
	r.Register("none", NoParameters("none", func(n Named) Plugin { return &stub{Named: n} }))
	if got := r.Types(); !slices.Equal(got, []string{"none", "stub"}) {
		t.Fatalf("types %v, want sorted [none stub]", got)
	}
	p, err := r.New("stub", "", nil)
	if err != nil || p.Name() != "stub" || p.Type() != "stub" {
		t.Fatalf("unnamed instance: %v, %v; want named after its type", p, err)
	}
	if p, err := r.New("none", "n1", Parameters("  null ")); err != nil || p.Name() != "n1" || p.Type() != "none" {
		t.Fatalf("named parameterless instance: %v, %v", p, err)
	}
	for _, tc := range []struct{ typ, name, params, want string }{
		{"missing", "", "", `unknown plugin type "missing" (known: [none stub])`},
		{"stub", "s1", `{"fail": true}`, `plugin "s1" (type stub): asked to fail`},
		{"stub", "s1", `{"fial": true}`, `plugin "s1" (type stub): parameters: json: unknown field "fial"`},
		{"none", "", `{"x": 1}`, `plugin "none" (type none): parameters: json: unknown field "x"`},
		{"stub", "", `{"fail": "yes"}`, `parameters: json: cannot unmarshal`},
	} {
		if _, err := r.New(tc.typ, tc.name, Parameters(tc.params)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s, %q, %s): error %v, want %q", tc.typ, tc.name, tc.params, err, tc.want)
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	r := NewRegistry()
	r.Register("stub", stubFactory)
	defer func() {
		if recover() == nil {
			t.Fatal("registering a type twice did not panic")
		}
	}()
	r.Register("stub", stubFactory)
}

func TestParametersDecode(t *testing.T) {
	var p struct {
		N int `json:"n"`
	}
	for _, empty := range []string{"", "  ", "null", " null\n"} {
		p.N = 5
		if err := Parameters(empty).Decode(&p); err != nil || p.N != 5 {
			t.Errorf("%q: n %d, error %v; want defaults kept", empty, p.N, err)
		}
	}
	if err := Parameters(`{"n": 3}`).Decode(&p); err != nil || p.N != 3 {
		t.Errorf("n %d, error %v; want 3", p.N, err)
	}
}
