package hftokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// llama3Dir is where hack/tokenizer-llama3.sh (make tokenizer-llama3, part
// of make test) puts Llama 3's tokenizer.json and the reference IDs.
func llama3Dir(t testing.TB) string {
	dir := os.Getenv("IGW_TOKENIZER_LLAMA3_DIR")
	if dir == "" {
		cache := os.Getenv("IGW_CACHE_DIR")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				t.Skipf("no cache directory: %v", err)
			}
			cache = filepath.Join(base, "igw")
		}
		dir = filepath.Join(cache, "tokenizer-llama3-3.7.2")
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("Llama 3's tokenizer.json is not in %s: run `make tokenizer-llama3` (make test does) to fetch it", dir)
	}
	return dir
}

func loadLlama3(t testing.TB) (*Tokenizer, string) {
	dir := llama3Dir(t)
	tk, err := Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tk, dir
}

// TestLlama3MatchesReference holds the Go tokenizer to the IDs of the
// package's own JavaScript tokenizer (transformers.js) for strings that
// exercise the pre-tokenizer's every branch, and to Llama 3's published IDs
// of Hugging Face's example sentence.
func TestLlama3MatchesReference(t *testing.T) {
	tk, dir := loadLlama3(t)
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text string   `json:"text"`
		IDs  []uint32 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("expected.json holds %d cases", len(cases))
	}
	if tk.fast == nil {
		t.Fatal("Llama 3's file does not take the fast path")
	}
	for _, c := range cases {
		for name, encode := range map[string]func(string, bool) ([]uint32, error){"fast": tk.Encode, "general": tk.encodeGeneral} {
			got, err := encode(c.Text, false)
			if err != nil {
				t.Fatalf("%s %q: %v", name, c.Text, err)
			}
			if !slices.Equal(got, c.IDs) {
				t.Errorf("%s %q:\n got %v\nwant %v", name, c.Text, got, c.IDs)
			}
		}
	}
	published := []uint32{9906, 11, 856, 5679, 374, 19369} // "Hello, my dog is cute" in Llama 3's vocabulary
	if got, _ := tk.Encode("Hello, my dog is cute", false); !slices.Equal(got, published) {
		t.Errorf("Hello, my dog is cute: %v, want %v", got, published)
	}
}

// TestAppendPromptTokens: a completion body's prompt string or token IDs,
// the text without a body, and a clear error for chats.
func TestAppendPromptTokens(t *testing.T) {
	tk, _ := loadLlama3(t)
	want, _ := tk.Encode("Hello, my dog is cute", true)
	for name, body := range map[string]string{
		"string": `{"model":"m","prompt":"Hello, my dog is cute"}`,
		"ids":    `{"model":"m","prompt":[9906,11,856,5679,374,19369]}`,
	} {
		got, err := tk.AppendPromptTokens(nil, []byte(body), "")
		if err != nil {
			t.Fatal(err)
		}
		if name == "ids" {
			want := []uint32{9906, 11, 856, 5679, 374, 19369}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %v", name, got)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", name, got, want)
		}
	}
	if got, _ := tk.AppendPromptTokens([]uint32{7}, nil, "Hello, my dog is cute"); !slices.Equal(got, append([]uint32{7}, want...)) {
		t.Fatalf("text: %v", got)
	}
	if _, err := tk.AppendPromptTokens(nil, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), ""); err != ErrChatTemplate {
		t.Fatalf("chat: %v, want ErrChatTemplate", err)
	}
}

func TestParseRejectsBadFiles(t *testing.T) {
	for name, data := range map[string]string{
		"not json":  "nope",
		"no model":  `{"version":"1.0"}`,
		"bad regex": `{"model":{"type":"WordLevel","vocab":{"a":0},"unk_token":"a"},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"a(?=b)"},"behavior":"Isolated","invert":false}}`,
	} {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestGPT4Split checks the hand-written matcher on the cases the look-ahead
// decides, against splits worked out from the pattern.
func TestGPT4Split(t *testing.T) {
	for in, want := range map[string][]string{
		"a  b":           {"a", " ", " b"},
		"x \n\n  y":      {"x", " \n\n", " ", " y"},
		"trailing   ":    {"trailing", "   "},
		"I'M (ok) 12345": {"I", "'M", " (", "ok", ")", " ", "123", "45"},
		"\tfoo!!\n\nbar": {"\tfoo", "!!\n\n", "bar"},
		"ſ'ſ":            {"ſ", "'ſ"},
	} {
		var got []string
		for _, m := range patternFunc(matchGPT4).FindMatches(in) {
			got = append(got, in[m.Offsets[0]:m.Offsets[1]])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// BenchmarkLlama3Encode measures tokenizing an 8 KB prompt: English text
// whose words repeat (warm word cache), and random words none of which was
// seen before (every word through BPE).
func BenchmarkLlama3Encode(b *testing.B) {
	tk, _ := loadLlama3(b)
	english := ""
	for len(english) < 8000 {
		english += "The quick brown fox jumps over the lazy dog; it's 1234 times faster.\n"
	}
	rng := rand.New(rand.NewPCG(1, 1))
	randomText := func() string {
		var sb strings.Builder
		for sb.Len() < 8000 {
			for range 3 + rng.IntN(6) {
				sb.WriteByte(byte('a' + rng.IntN(26)))
			}
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	for name, next := range map[string]func() string{"english": func() string { return english }, "unseen-words": randomText} {
		b.Run(name, func(b *testing.B) {
			ids, _ := tk.Encode(next(), true)
			b.ReportMetric(float64(len(ids)), "tokens")
			b.SetBytes(8000)
			for b.Loop() {
				if _, err := tk.Encode(next(), true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzLlama3FastMatchesGeneral holds the fast path to the library's general
// pipeline on arbitrary text (skipped without the file).
func FuzzLlama3FastMatchesGeneral(f *testing.F) {
	for _, s := range []string{"Hello, my dog is cute", "  a\n\n b'S 1234 ſ <|eot_id|>x", "\t\r\n", "ü 東京 🙂", " ASSS0"} {
		f.Add(s)
	}
	tk, _ := loadLlama3(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // requests are JSON strings: valid UTF-8
		}
		fast, err1 := tk.Encode(s, true)
		general, err2 := tk.encodeGeneral(s, true)
		if (err1 == nil) != (err2 == nil) || !slices.Equal(fast, general) {
			t.Fatalf("%q: fast %v (%v), general %v (%v)", s, fast, err1, general, err2)
		}
	})
}

// TestGeneralBPE holds the general pipeline's BPE to Hugging Face's rules on
// a small model: repeats of one pair merge leftmost first, a character
// outside the vocabulary falls back to its bytes where the vocabulary has
// them, and unknown characters in a row fuse into one unknown token.
func TestGeneralBPE(t *testing.T) {
	file := func(byteFallback bool) string {
		return `{"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":` + strconv.FormatBool(byteFallback) + `,
			"vocab":{"<unk>":0,"a":1,"b":2,"aa":3,"<0xC3>":4,"<0xA9>":5},"merges":["a a"]}}`
	}
	for _, c := range []struct {
		fallback bool
		text     string
		want     []uint32
	}{
		{false, "aaab", []uint32{3, 1, 2}},
		{false, "aaaa", []uint32{3, 3}},
		{true, "aé", []uint32{1, 4, 5}},
		{false, "aéé", []uint32{1, 0}},
		{true, "xyb", []uint32{0, 2}},
	} {
		tk, err := Parse([]byte(file(c.fallback)))
		if err != nil {
			t.Fatal(err)
		}
		if tk.fast != nil {
			t.Fatal("a file without ByteLevel took the fast path")
		}
		got, err := tk.Encode(c.text, false)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("byte fallback %v, %q: %v (%v), want %v", c.fallback, c.text, got, err, c.want)
		}
	}
}
