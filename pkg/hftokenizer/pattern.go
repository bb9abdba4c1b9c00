package hftokenizer

import (
	"unicode"
	"unicode/utf8"

	"github.com/sugarme/tokenizer/normalizer"
)

// gpt4Pattern is the pre-tokenizer split of GPT-4-style vocabularies (Llama 3
// and others) as tokenizer.json spells it.
const gpt4Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// A matcher returns the length in bytes of the pattern's match at the start
// of s (every position matches something: the last alternatives take any
// whitespace, the others anything else).
type matcher func(s string) int

// patternFunc adapts a matcher to the library's Pattern: the string is cut
// into consecutive matches.
type patternFunc matcher

func (m patternFunc) FindMatches(inside string) []normalizer.OffsetsMatch {
	if inside == "" {
		return []normalizer.OffsetsMatch{{Offsets: []int{0, 0}, Match: false}}
	}
	var out []normalizer.OffsetsMatch
	for i := 0; i < len(inside); {
		n := m(inside[i:])
		if n <= 0 { // cannot happen for these patterns; keep the cover contiguous anyway
			_, n = utf8.DecodeRuneInString(inside[i:])
		}
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{i, i + n}, Match: true})
		i += n
	}
	return out
}

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isNewline(r rune) bool {
	return r == '\r' || r == '\n'
}

// run is the length of the longest prefix of s whose runes satisfy f, at
// most max runes (0: no limit).
func run(s string, f func(rune) bool, max int) int {
	n, count := 0, 0
	for n < len(s) && (max == 0 || count < max) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !f(r) {
			break
		}
		n += w
		count++
	}
	return n
}

// contraction matches 's 't 're 've 'm 'll 'd; caseless, as (?i:...) is,
// where Unicode's simple case folding also maps ſ (long s) to s.
func contraction(s string, caseless bool) int {
	if len(s) < 2 || s[0] != '\'' {
		return 0
	}
	rest := s[1:]
	lower := func(i int) (rune, int) {
		r, w := utf8.DecodeRuneInString(rest[i:])
		if caseless {
			if r == 'ſ' {
				r = 's'
			}
			r = unicode.ToLower(r)
		}
		return r, w
	}
	for _, suffix := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		i, ok := 0, true
		for _, want := range suffix {
			if i >= len(rest) {
				ok = false
				break
			}
			r, w := lower(i)
			if r != want {
				ok = false
				break
			}
			i += w
		}
		if ok {
			return 1 + i
		}
	}
	return 0
}

// whitespace applies the patterns' trailing alternatives to a whitespace run
// at the start of s: \s*[\r\n]+ (GPT-4 only) up to the run's last newline,
// else \s+(?!\S): the run less its last character when something follows,
// else \s+.
func whitespace(s string, newlines bool) int {
	n := run(s, isSpace, 0)
	if n == 0 {
		return 0
	}
	if newlines {
		last := -1
		for i, r := range s[:n] {
			if isNewline(r) {
				last = i + 1
			}
		}
		if last > 0 {
			return last
		}
	}
	if n == len(s) {
		return n
	}
	_, w := utf8.DecodeLastRuneInString(s[:n])
	if n-w > 0 {
		return n - w
	}
	return n
}

// matchGPT4 is gpt4Pattern at the start of s.
func matchGPT4(s string) int {
	if n := contraction(s, true); n > 0 {
		return n
	}
	r, w := utf8.DecodeRuneInString(s)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(r) {
		return run(s, isLetter, 0)
	}
	if !isNewline(r) && !isNumber(r) {
		if n := run(s[w:], isLetter, 0); n > 0 {
			return w + n
		}
	}
	// \p{N}{1,3}
	if isNumber(r) {
		return run(s, isNumber, 3)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	other := func(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }
	start := 0
	if r == ' ' {
		start = 1
	}
	if n := run(s[start:], other, 0); n > 0 {
		end := start + n
		return end + run(s[end:], isNewline, 0)
	}
	return whitespace(s, true)
}

// matchGPT2 is GPT-2's split, which ByteLevel applies with use_regex:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(s string) int {
	if n := contraction(s, false); n > 0 {
		return n
	}
	start := 0
	if s[0] == ' ' {
		start = 1
	}
	other := func(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }
	for _, class := range []func(rune) bool{isLetter, isNumber, other} {
		if n := run(s[start:], class, 0); n > 0 {
			return start + n
		}
	}
	return whitespace(s, false)
}
