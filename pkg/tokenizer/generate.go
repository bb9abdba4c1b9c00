package tokenizer

import (
	"strings"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// fragments are the 4-byte pieces generated text is made of. Each is exactly one
// token, so generated text of n tokens is 4n bytes and concatenates cleanly.
var fragments = buildFragments()

// fragmentIDs[i] is the token ID of fragments[i].
var fragmentIDs = func() []uint32 {
	ids := make([]uint32, len(fragments))
	for i, f := range fragments {
		ids[i] = AppendTokens(nil, f)[0]
	}
	return ids
}()

func buildFragments() []string {
	const consonants = "bcdfghklmnprstvz"
	const vowels = "aeiou"
	out := make([]string, 0, 1024)
	for i, c1 := range consonants {
		for j, v := range vowels {
			for k, c2 := range consonants {
				// Alternate word endings and word middles so text reads as words.
				if (i+j+k)%3 == 0 {
					out = append(out, string([]rune{c1, v, c2, ' '}))
				} else {
					out = append(out, string([]rune{c1, v, c2, rune(vowels[(i+k)%len(vowels)])}))
				}
			}
		}
	}
	return out
}

// GenerateText returns deterministic word-like text of exactly tokens tokens
// (4·tokens bytes). Different seeds give different text; the same seed the same,
// on every platform.
func GenerateText(seed uint64, tokens int) string {
	if tokens <= 0 {
		return ""
	}
	rng := splitmix.Source(seed)
	var b strings.Builder
	b.Grow(tokens * tokencount.CharsPerToken)
	for range tokens {
		b.WriteString(fragments[rng.Next()%uint64(len(fragments))])
	}
	return b.String()
}

// OutputToken is the ID of the i-th (0-based) token a simulated model generates.
// It depends on the position only, so a client that appends a reply to the next
// turn's prompt reproduces exactly the tokens the server cached.
func OutputToken(i int) uint32 { return fragmentIDs[outputIndex(i)] }

// OutputFragment is the text of OutputToken(i).
func OutputFragment(i int) string { return fragments[outputIndex(i)] }

// outputIndex walks the fragment table with a stride coprime with its length, so
// replies cycle through every fragment.
func outputIndex(i int) int { return (i*389 + 7) % len(fragments) }

// OutputText is the text of generated tokens [start, start+n).
func OutputText(start, n int) string {
	var b strings.Builder
	b.Grow(n * tokencount.CharsPerToken)
	for i := start; i < start+n; i++ {
		b.WriteString(OutputFragment(i))
	}
	return b.String()
}
