package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/tokencount"
)

func TestCountAndTokenize(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"abcdefgh", 2}, {"héllo wörld", 4}} {
		if got := Count(tc.text); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
		if got := len(Tokenize(tc.text)); got != tc.want {
			t.Errorf("len(Tokenize(%q)) = %d, want %d", tc.text, got, tc.want)
		}
	}
	if a, b := Tokenize("abcd"), Tokenize("abce"); a[0] == b[0] {
		t.Errorf("different 4-byte chunks share token ID %d", a[0])
	}
}

// TestAppendTokensIDs pins the IDs (4 bytes read little-endian, a short last
// token zero-padded), that tokens are appended after dst's, and that copying
// the bytes (on little-endian machines) and reading them token by token agree.
func TestAppendTokensIDs(t *testing.T) {
	want := []uint32{7, 0x64636261, 0x68676665, 0x6a69}
	for _, copyBytes := range []bool{false, littleEndian} {
		if got := appendTokens([]uint32{7}, "abcdefghij", copyBytes); !slices.Equal(got, want) {
			t.Errorf("appendTokens(copy %v) = %#x, want %#x", copyBytes, got, want)
		}
	}
	if !littleEndian {
		return
	}
	text := GenerateText(1, 3001)
	for n := range 9 {
		if a, b := appendTokens(nil, text[:len(text)-n], true), appendTokens(nil, text[:len(text)-n], false); !slices.Equal(a, b) {
			t.Fatalf("%d bytes: copied IDs differ from read ones", len(text)-n)
		}
	}
}

func TestDetokenizeRoundTrip(t *testing.T) {
	for _, s := range []string{"", "x", "hello world", "four", GenerateText(3, 50)} {
		if got := Detokenize(Tokenize(s)); got != s {
			t.Errorf("Detokenize(Tokenize(%q)) = %q", s, got)
		}
	}
}

func TestJoinSharesLeadingTokens(t *testing.T) {
	system := "You are a helpful assistant." // 28 bytes: aligned already
	odd := "Be brief"                        // 8 bytes
	a := Tokenize(Join(system, odd+"!", "What is the weather in Paris?"))
	b := Tokenize(Join(system, odd+"!", "Tell me a joke"))
	shared := Count(Align(system)) + Count(Align(odd+"!"))
	if !slices.Equal(a[:shared], b[:shared]) {
		t.Fatalf("prompts built from the same leading parts differ in their first %d tokens", shared)
	}
	if slices.Equal(a[:shared+1], b[:shared+1]) {
		t.Fatalf("prompts with different questions share token %d", shared)
	}
	// Without alignment the boundary token mixes the shared and the distinct part.
	c := Tokenize(odd + "!" + "What")
	d := Tokenize(odd + "!" + "Tell")
	if c[2] == d[2] {
		t.Fatal("unaligned concatenation unexpectedly shares the boundary token")
	}
}

func TestAlign(t *testing.T) {
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abcde"} {
		got := Align(s)
		if len(got)%tokencount.CharsPerToken != 0 || !strings.HasPrefix(got, s) || len(got)-len(s) >= tokencount.CharsPerToken {
			t.Errorf("Align(%q) = %q", s, got)
		}
	}
}

func TestGenerateText(t *testing.T) {
	a := GenerateText(42, 1000)
	if len(a) != 4000 || Count(a) != 1000 {
		t.Fatalf("GenerateText(42, 1000) has %d bytes, %d tokens", len(a), Count(a))
	}
	if a != GenerateText(42, 1000) {
		t.Fatal("GenerateText is not deterministic")
	}
	if a == GenerateText(43, 1000) {
		t.Fatal("different seeds gave the same text")
	}
	if !strings.HasPrefix(GenerateText(42, 1000), GenerateText(42, 10)) {
		t.Fatal("a shorter text of the same seed is not a prefix of the longer one")
	}
	if GenerateText(1, 0) != "" || GenerateText(1, -3) != "" {
		t.Fatal("non-positive length should give empty text")
	}
	if !strings.Contains(a, " ") {
		t.Fatal("generated text has no word breaks")
	}
	// Generated parts concatenate without alignment padding.
	joined := GenerateText(1, 7) + GenerateText(2, 5)
	if Join(GenerateText(1, 7), GenerateText(2, 5)) != joined {
		t.Fatal("generated text is not token-aligned")
	}
}

func TestOutputTextTokenizesToOutputTokens(t *testing.T) {
	text := OutputText(3, 40)
	toks := Tokenize(text)
	if len(toks) != 40 {
		t.Fatalf("OutputText(3, 40) is %d tokens", len(toks))
	}
	for i, tok := range toks {
		if tok != OutputToken(3+i) {
			t.Fatalf("token %d of OutputText is %d, OutputToken(%d) = %d", i, tok, 3+i, OutputToken(3+i))
		}
	}
	if OutputText(0, 5)+OutputText(5, 5) != OutputText(0, 10) {
		t.Fatal("OutputText pieces do not concatenate")
	}
	distinct := map[uint32]bool{}
	for i := range len(fragments) {
		distinct[OutputToken(i)] = true
	}
	if len(distinct) != len(fragments) {
		t.Fatalf("output tokens cycle through %d of %d fragments", len(distinct), len(fragments))
	}
}

func TestBlockHashes(t *testing.T) {
	shared := GenerateText(7, 64)
	a := Tokenize(shared + GenerateText(8, 40))
	b := Tokenize(shared + GenerateText(9, 40))
	ha := BlockHashes(nil, HashSeed(""), a, 16)
	hb := BlockHashes(nil, HashSeed(""), b, 16)
	if len(ha) != 104/16 {
		t.Fatalf("%d hashes for 104 tokens, want %d", len(ha), 104/16)
	}
	if !slices.Equal(ha[:4], hb[:4]) {
		t.Fatal("blocks of a shared 64-token prefix hash differently")
	}
	for i := 4; i < len(ha); i++ {
		if ha[i] == hb[i] {
			t.Fatalf("block %d after the shared prefix hashes equal", i)
		}
	}
	hl := BlockHashes(nil, HashSeed("adapter-1"), a, 16)
	if hl[0] == ha[0] {
		t.Fatal("the adapter seed does not separate caches")
	}
	// The chain depends on everything before a block, not only on the block.
	c := slices.Clone(a)
	c[0]++
	hc := BlockHashes(nil, HashSeed(""), c, 16)
	if hc[3] == ha[3] {
		t.Fatal("a change in block 0 did not change the hash of block 3")
	}
	if ChainHash(ha[0], a[16:32]) != ha[1] {
		t.Fatal("ChainHash does not extend the chain as BlockHashes does")
	}
}

func FuzzTokenizeRoundTrip(f *testing.F) {
	f.Add("hello world")
	f.Add("")
	f.Add("abc")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return // NUL is the padding byte; it cannot round-trip at the end of a token
		}
		toks := Tokenize(s)
		if len(toks) != Count(s) {
			t.Fatalf("len(Tokenize) = %d, Count = %d", len(toks), Count(s))
		}
		if got := Detokenize(toks); got != s {
			t.Fatalf("round trip %q -> %q", s, got)
		}
	})
}

func FuzzJoinPrefix(f *testing.F) {
	f.Add("system prompt", "user a", "user b")
	f.Fuzz(func(t *testing.T, prefix, x, y string) {
		a := Tokenize(Join(prefix, x))
		b := Tokenize(Join(prefix, y))
		n := Count(Align(prefix))
		if !slices.Equal(a[:n], b[:n]) {
			t.Fatalf("Join(%q, ...) leading tokens differ", prefix)
		}
	})
}

func BenchmarkTokenize4KB(b *testing.B) {
	text := GenerateText(1, 1000)
	dst := make([]uint32, 0, 1000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		dst = AppendTokens(dst[:0], text)
	}
}

func TestRenderChatSharesLeadingMessages(t *testing.T) {
	system := Message{Role: "system", Content: GenerateText(1, 100) + "odd"}
	a := Tokenize(RenderChat([]Message{system, {Role: "user", Content: "hi"}}))
	b := Tokenize(RenderChat([]Message{system, {Role: "user", Content: "hello there"}}))
	head := Count(RenderChat(nil)) // the assistant header alone
	shared := Count(Align("<|system|>\n")) + Count(Align(system.Content))
	if !slices.Equal(a[:shared], b[:shared]) {
		t.Fatal("conversations with the same system message differ in its tokens")
	}
	if slices.Equal(a[:shared+head+1], b[:shared+head+1]) {
		t.Fatal("different user messages tokenize the same")
	}
	// A follow-up turn extends the previous turn's prompt plus the reply.
	turn1 := []Message{system, {Role: "user", Content: "q1"}}
	reply := OutputText(0, 10)
	turn2 := append(append([]Message{}, turn1...), Message{Role: "assistant", Content: reply}, Message{Role: "user", Content: "q2"})
	p1 := Tokenize(RenderChat(turn1))
	p2 := Tokenize(RenderChat(turn2))
	if !slices.Equal(p1, p2[:len(p1)]) {
		t.Fatal("the second turn does not extend the first turn's prompt")
	}
	for i := range 10 {
		if p2[len(p1)+i] != OutputToken(i) {
			t.Fatalf("reply token %d in the second turn is not the generated token", i)
		}
	}
}
