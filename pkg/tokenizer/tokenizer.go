// Package tokenizer is igw's deterministic stand-in for a model tokenizer.
//
// Every 4 bytes of text are one token (tokencount.CharsPerToken, the endpoint
// picker's estimate), and a token's ID is those bytes read as a little-endian
// integer. The simulator, the picker's prefix-scorer tests and the
// benchmark's prompt generator all use it, so a prompt costs the same number of
// tokens everywhere and two prompts that share a text prefix share leading token
// IDs (and so KV-cache blocks), as long as the shared part ends on a 4-byte
// boundary. Join and Align keep that boundary for prompts assembled from parts.
package tokenizer

import (
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"

	"github.com/igw-dev/igw/pkg/tokencount"
)

// Count returns the number of tokens text tokenizes to.
func Count(text string) int { return tokencount.Estimate(text) }

// Tokenize returns the token IDs of text.
func Tokenize(text string) []uint32 { return AppendTokens(make([]uint32, 0, Count(text)), text) }

// AppendTokens appends the token IDs of text to dst and returns the extended slice.
func AppendTokens(dst []uint32, text string) []uint32 {
	return appendTokens(dst, text, littleEndian)
}

// littleEndian is whether the machine stores integers as token IDs read
// their bytes: then the IDs of a text's full tokens are its bytes as they
// lie, and tokenizing is one copy (a router tokenizes every prompt it scores).
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func appendTokens(dst []uint32, text string, copyBytes bool) []uint32 {
	const width = tokencount.CharsPerToken
	n := len(text) / width
	dst = slices.Grow(dst, n+1)
	out := dst[len(dst) : len(dst)+n]
	if copyBytes {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), n*width), text)
	} else {
		for i := range out {
			out[i] = binary.LittleEndian.Uint32([]byte(text[i*width : i*width+width]))
		}
	}
	dst = dst[:len(dst)+n]
	if full := n * width; full < len(text) {
		var last [width]byte
		copy(last[:], text[full:])
		dst = append(dst, binary.LittleEndian.Uint32(last[:]))
	}
	return dst
}

// Detokenize returns the text of tokens; padding bytes of a short last token are dropped.
func Detokenize(tokens []uint32) string {
	var b strings.Builder
	b.Grow(len(tokens) * tokencount.CharsPerToken)
	var chunk [tokencount.CharsPerToken]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(chunk[:], t)
		n := tokencount.CharsPerToken
		for n > 0 && chunk[n-1] == 0 {
			n--
		}
		b.Write(chunk[:n])
	}
	return b.String()
}

// Align pads s with spaces to a whole number of tokens, so that whatever is
// appended after it starts a new token.
func Align(s string) string {
	if r := len(s) % tokencount.CharsPerToken; r != 0 {
		return s + strings.Repeat(" ", tokencount.CharsPerToken-r)
	}
	return s
}

// Join concatenates parts, each aligned to a token boundary. Prompts built by
// Join from the same leading parts tokenize to the same leading tokens.
func Join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(Align(p))
	}
	return b.String()
}
