package scheduling

import "fmt"

// DefaultMinMatchTokens is the prefix scorers' default minMatchTokens. In some
// traces every request shares its first block (a system prompt), and scoring
// so short a match would send all traffic to one endpoint, or pull it across
// regions.
const DefaultMinMatchTokens = 128

// PrefixMatch is the base of the scorers of how much of the prompt a candidate
// holds (prefix-cache, member-prefix-locality): a match shorter than
// MinMatchTokens scores 0.
type PrefixMatch struct {
	Named
	MinMatchTokens int
}

// PrefixMatchParameters are the parameters of a PrefixMatch scorer.
type PrefixMatchParameters struct {
	// MinMatchTokens is the shortest match that scores (default
	// DefaultMinMatchTokens).
	MinMatchTokens int `json:"minMatchTokens"`
}

// WithMinMatch is the factory of a PrefixMatch scorer type whose
// minMatchTokens must be at least lowest.
func WithMinMatch(typ string, lowest int, build func(PrefixMatch) Plugin) Factory {
	defaults := PrefixMatchParameters{MinMatchTokens: DefaultMinMatchTokens}
	return WithParameters(typ, defaults, func(n Named, p PrefixMatchParameters) (Plugin, error) {
		if p.MinMatchTokens < lowest {
			return nil, fmt.Errorf("minMatchTokens must be at least %d, got %d", lowest, p.MinMatchTokens)
		}
		return build(PrefixMatch{Named: n, MinMatchTokens: p.MinMatchTokens}), nil
	})
}
