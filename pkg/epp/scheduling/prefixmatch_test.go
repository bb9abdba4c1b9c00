package scheduling

import "testing"

type prefixStub struct{ PrefixMatch }

func TestWithMinMatch(t *testing.T) {
	f := WithMinMatch("prefix-stub", 1, func(m PrefixMatch) Plugin { return &prefixStub{m} })
	for _, tc := range []struct {
		params string
		want   int
	}{{"", DefaultMinMatchTokens}, {`{"minMatchTokens": 1}`, 1}} {
		p, err := f("p", Parameters(tc.params))
		if err != nil || p.(*prefixStub).MinMatchTokens != tc.want || p.Name() != "p" || p.Type() != "prefix-stub" {
			t.Errorf("%q: %+v, %v; want minMatchTokens %d", tc.params, p, err, tc.want)
		}
	}
	for _, params := range []string{`{"minMatchTokens": 0}`, `{"minMatch": 64}`} {
		if _, err := f("p", Parameters(params)); err == nil {
			t.Errorf("%s accepted", params)
		}
	}
}
