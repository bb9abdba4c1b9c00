package requestbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
)

// outcome classifies what a body means for routing.
type outcome int

const (
	outInvalid outcome = iota
	outNotObject
	outMissing // absent or null
	outNotString
	outFound
)

func (o outcome) String() string {
	return [...]string{"invalid", "not-object", "missing", "not-string", "found"}[o]
}

// reference is the oracle: what encoding/json makes of the body.
func reference(doc []byte) (outcome, string) {
	if !json.Valid(doc) {
		return outInvalid, ""
	}
	if bytes.TrimLeft(doc, " \t\r\n")[0] != '{' {
		return outNotObject, ""
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil {
		panic(fmt.Sprintf("valid object rejected by Unmarshal: %v", err))
	}
	raw, ok := members["model"]
	raw = bytes.TrimSpace(raw)
	switch {
	case !ok || string(raw) == "null":
		return outMissing, ""
	case raw[0] != '"':
		return outNotString, ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		panic(fmt.Sprintf("string member rejected: %v", err))
	}
	return outFound, s
}

// classify maps ExtractModel's answer onto the same outcomes.
func classify(model string, found bool, err error) (outcome, string) {
	var syn *SyntaxError
	var typ *ModelTypeError
	switch {
	case errors.As(err, &syn):
		return outInvalid, ""
	case errors.Is(err, ErrNotObject):
		return outNotObject, ""
	case errors.As(err, &typ):
		return outNotString, ""
	case err != nil:
		panic(err)
	case !found:
		return outMissing, ""
	}
	return outFound, model
}

// scanInChunks feeds doc to a Stream chunk bytes at a time, as a streamed body arrives.
func scanInChunks(doc []byte, chunk int) (string, bool, error) {
	var st Stream
	defer st.Close()
	for end := chunk; end < len(doc); end += chunk {
		if err := st.Write(doc[:end]); err != nil {
			return "", false, err
		}
	}
	return st.Finish(doc)
}

// jsonSyntaxError is encoding/json's error for doc, nil when it is valid.
func jsonSyntaxError(doc []byte) *json.SyntaxError {
	var v json.RawMessage
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(doc, &v), &se) {
		return se
	}
	return nil
}

// checkSyntaxError fails t unless err is encoding/json's error for doc, with
// the offset of the offending byte (encoding/json counts the bytes it read,
// one more). Two differences are kept, as the body-based router has always
// answered: where encoding/json ends a truncated \u escape or number by
// feeding it a space ("invalid character ' ' ..." at the end), the scanner
// says the input ended; and too deep a document is "exceeding the maximum
// nesting depth" where encoding/json says "exceeded max depth".
func checkSyntaxError(t *testing.T, doc []byte, err error) {
	t.Helper()
	var got *SyntaxError
	if !errors.As(err, &got) {
		return
	}
	want := jsonSyntaxError(doc)
	switch {
	case want == nil:
		t.Fatalf("%.200q: %v; encoding/json finds no syntax error", doc, err)
	case got.msg == "unexpected end of JSON input" && got.Offset == int64(len(doc)) && want.Offset == int64(len(doc)):
	case strings.HasSuffix(got.msg, "exceeding the maximum nesting depth") && strings.HasSuffix(want.Error(), "exceeded max depth") && got.Offset+1 == want.Offset:
	case got.msg != want.Error() || got.Offset+1 != want.Offset:
		t.Fatalf("%.200q: %q at %d; encoding/json says %q at %d", doc, got.msg, got.Offset, want.Error(), want.Offset)
	}
}

// checkAgainstReference fails t when ExtractModel, whole or in chunks, disagrees
// with encoding/json on doc: on the outcome, and on the error of an invalid one.
func checkAgainstReference(t *testing.T, doc []byte) {
	t.Helper()
	wantOut, wantModel := reference(doc)
	model, found, err := ExtractModel(doc)
	gotOut, gotModel := classify(model, found, err)
	if gotOut != wantOut || gotModel != wantModel {
		t.Fatalf("ExtractModel(%.200q) = %v %q; encoding/json says %v %q", doc, gotOut, gotModel, wantOut, wantModel)
	}
	checkSyntaxError(t, doc, err)
	for _, chunk := range []int{1, 3, 64} {
		if chunk >= len(doc) {
			break
		}
		model, found, err := scanInChunks(doc, chunk)
		out, m := classify(model, found, err)
		if out != wantOut || m != wantModel {
			t.Fatalf("in %d-byte chunks, %.200q = %v %q; encoding/json says %v %q", chunk, doc, out, m, wantOut, wantModel)
		}
		checkSyntaxError(t, doc, err)
	}
}

// seedCorpus is the hand-written part of the fuzz corpus: every rule the scanner must
// share with encoding/json, as valid and invalid documents.
var seedCorpus = []string{
	`{"model":"llama"}`,
	` {"model" : "llama" } `,
	"\t\r\n{\n\"model\":\n\"a\"\n}\n",
	`{"model":"a","model":"b"}`,
	`{"model":"a","model":null}`,
	`{"model":null,"model":"b"}`,
	`{"model":"a","model":1}`,
	`{"model":1,"model":"b"}`,
	`{"model":null}`,
	`{}`,
	`{"other":"x"}`,
	`{"Model":"case matters"}`,
	`{"MODEL":"x"}`,
	`{"mod\u0065l":"escaped key"}`,
	`{"\u006d\u006F\u0064\u0065\u006c":"all escaped"}`,
	`{"model\u0000":"nul suffix"}`,
	`{"model ":"trailing space"}`,
	`{"mode":"short"}`,
	`{"models":"long"}`,
	`{"model":"\ud83d\ude00 pair"}`,
	`{"model":"\ud83d lone high"}`,
	`{"model":"\ude00 lone low"}`,
	`{"model":"\ud83d\u0041 high then BMP"}`,
	`{"model":"\ud83d\ud83d\ude00 high high low"}`,
	`{"model":"esc \" \\ \/ \b \f \n \r \t"}`,
	"{\"model\":\"raw \xff invalid utf8\"}",
	"{\"model\":\"\xed\xa0\x80 encoded surrogate\"}",
	"{\"model\":\"\xe2\x82 truncated\"}",
	"{\"model\":\"ok é ✓ 😀\"}",
	"{\"mod\xffel\":\"invalid key byte\"}",
	`{"model":1}`,
	`{"model":-0.5e+10}`,
	`{"model":true}`,
	`{"model":false}`,
	`{"model":{"name":"x"}}`,
	`{"model":["x"]}`,
	`{"a":{"model":"nested"},"b":[{"model":"in array"}]}`,
	`{"a":{"model":"nested"}}`,
	`[{"model":"x"}]`,
	`"model"`,
	`null`,
	`123`,
	`-0`,
	`true`,
	``,
	` `,
	`{`,
	`{"model"`,
	`{"model":`,
	`{"model":"x"`,
	`{"model":"x",}`,
	`{"model":"x"}}`,
	`{"model":"x"} {}`,
	`{"model":"x"} x`,
	`{model:"x"}`,
	`{'model':'x'}`,
	`{"model":"x" "a":1}`,
	`{"a":1,,"model":"x"}`,
	`{"a":[1,],"model":"x"}`,
	`{"a":[,1],"model":"x"}`,
	`{"a":01,"model":"x"}`,
	`{"a":1.,"model":"x"}`,
	`{"a":.1,"model":"x"}`,
	`{"a":1e,"model":"x"}`,
	`{"a":1e+,"model":"x"}`,
	`{"a":-,"model":"x"}`,
	`{"a":+1,"model":"x"}`,
	`{"a":1E-7,"b":0.0e0,"c":-12.5E+3,"model":"x"}`,
	`{"a":1e400,"model":"big number is valid JSON"}`,
	`{"a":tru,"model":"x"}`,
	`{"a":nul,"model":"x"}`,
	`{"a":True,"model":"x"}`,
	`{"a":NaN,"model":"x"}`,
	"{\"a\":\"ctl \x01 char\",\"model\":\"x\"}",
	"{\"a\":\"tab \t raw\",\"model\":\"x\"}",
	`{"a":"bad \x escape","model":"x"}`,
	`{"a":"bad \u12 escape","model":"x"}`,
	`{"a":"bad \uZZZZ escape","model":"x"}`,
	"\xef\xbb\xbf{\"model\":\"bom\"}",
	`{"model":"x"}` + "\x00",
	`{"a":{"b":{"c":[[[{"d":null}]]]}},"model":"deep"}`,
	`{"messages":[{"role":"user","content":"hi \"model\": \"fake\""}],"model":"real"}`,
	`{"model":""}`,
}

func FuzzExtractModel(f *testing.F) {
	for _, s := range seedCorpus {
		f.Add([]byte(s))
	}
	for _, b := range bodytest.Requests() { // small: large seeds make the fuzzer crawl
		f.Add(b.Body)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkAgainstReference(t, doc)
	})
}

// The fuzz corpus: testdata/fuzz_corpus.txt holds the inputs the fuzzer found
// interesting in past runs (one Go-quoted document per line), so every test run
// replays them. -fuzzcache also replays a fuzzer cache directory in full, and
// -update-corpus rewrites the file from it:
//
//	go test ./pkg/requestbody -run TestFuzzCorpus -v \
//	    -fuzzcache "$(go env GOCACHE)/fuzz/github.com/igw-dev/igw/pkg/requestbody/FuzzExtractModel" [-update-corpus]
var (
	fuzzCache    = flag.String("fuzzcache", "", "fuzzer cache directory of FuzzExtractModel to replay")
	updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz_corpus.txt from -fuzzcache")
)

const corpusFile = "testdata/fuzz_corpus.txt"

func TestFuzzCorpusAgreesWithEncodingJSON(t *testing.T) {
	data, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		doc, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("%s:%d: %v", corpusFile, i+1, err)
		}
		docs = append(docs, []byte(doc))
	}
	fromFile := len(docs)
	if *fuzzCache != "" {
		cached := readFuzzCache(t, *fuzzCache)
		docs = append(docs, cached...)
		if *updateCorpus {
			writeCorpus(t, docs)
		}
	}
	if fromFile < 100 && !*updateCorpus {
		t.Fatalf("%s holds only %d inputs", corpusFile, fromFile)
	}
	for _, doc := range docs {
		checkAgainstReference(t, doc)
	}
	t.Logf("%d inputs (%d from %s) agree with encoding/json", len(docs), fromFile, corpusFile)
}

// readFuzzCache reads the files "go test -fuzz" writes: a version line, then one
// []byte("...") value.
func readFuzzCache(t *testing.T, dir string) [][]byte {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		header, value, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
		quoted, ok := strings.CutPrefix(value, "[]byte(")
		if header != "go test fuzz v1" || !ok {
			t.Fatalf("%s: not a fuzz input of []byte", e.Name())
		}
		doc, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		docs = append(docs, []byte(doc))
	}
	return docs
}

func writeCorpus(t *testing.T, docs [][]byte) {
	seen := map[string]bool{}
	var lines []string
	for _, d := range docs {
		if q := strconv.Quote(string(d)); !seen[q] && len(d) <= 4<<10 {
			seen[q] = true
			lines = append(lines, q)
		}
	}
	slices.Sort(lines)
	if err := os.WriteFile(corpusFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d inputs to %s", len(lines), corpusFile)
}

func TestSeedCorpusAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range seedCorpus {
		checkAgainstReference(t, []byte(s))
	}
}

func TestNestingLimitMatchesEncodingJSON(t *testing.T) {
	for _, depth := range []int{maxNestingDepth - 1, maxNestingDepth, maxNestingDepth + 1} {
		arrays := `{"model":"m","a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		objects := strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
		checkAgainstReference(t, []byte(arrays))
		checkAgainstReference(t, []byte(objects))
	}
}

// TestGeneratedCorpusAgreesWithEncodingJSON runs the differential check on random
// documents, valid and damaged, from a fixed seed: the fuzzer's job in miniature, on
// every test run.
func TestGeneratedCorpusAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		doc := genDocument(rng)
		if rng.IntN(3) == 0 {
			doc = damage(rng, doc)
		}
		checkAgainstReference(t, doc)
	}
}

// genDocument writes a random object whose top level sometimes holds "model"
// (possibly several times, escaped, or of the wrong type).
func genDocument(rng *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	n := rng.IntN(5)
	for i := range n {
		if i > 0 {
			b.WriteString(pick(rng, ",", " , ", ",\n"))
		}
		key := pick(rng, `"model"`, `"mod\u0065l"`, `"messages"`, `"prompt"`, `"Model"`, `"input"`, `"model\u0000"`)
		b.WriteString(key)
		b.WriteString(pick(rng, ":", " : ", ":\t"))
		genValue(rng, &b, 0)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func genValue(rng *rand.Rand, b *bytes.Buffer, depth int) {
	kind := rng.IntN(8)
	if depth > 3 {
		kind = rng.IntN(4)
	}
	switch kind {
	case 0, 1:
		b.WriteString(genString(rng))
	case 2:
		b.WriteString(pick(rng, "0", "-1", "3.25", "1e9", "-0.0E-2", "12345678901234567890"))
	case 3:
		b.WriteString(pick(rng, "true", "false", "null"))
	case 4, 5:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			genValue(rng, b, depth+1)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('{')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(pick(rng, `"model"`, `"role"`, `"content"`))
			b.WriteByte(':')
			genValue(rng, b, depth+1)
		}
		b.WriteByte('}')
	}
}

func genString(rng *rand.Rand) string {
	pieces := []string{"llama", "a", " ", `\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		"é", "😀", "\xff", "\xed\xa0\x80", `\/`, "mistral-7b", "/", "-lora"}
	var s strings.Builder
	s.WriteByte('"')
	for range rng.IntN(6) {
		s.WriteString(pieces[rng.IntN(len(pieces))])
	}
	s.WriteByte('"')
	return s.String()
}

// damage makes one random edit: delete, duplicate, or overwrite a byte.
func damage(rng *rand.Rand, doc []byte) []byte {
	if len(doc) == 0 {
		return doc
	}
	i := rng.IntN(len(doc))
	out := append([]byte(nil), doc[:i]...)
	switch rng.IntN(3) {
	case 0: // delete
		out = append(out, doc[i+1:]...)
	case 1: // duplicate
		out = append(out, doc[i:]...)
	default:
		const alphabet = "{}[]\",:\\ 0-.eEtfnu\x01\xff"
		out = append(out, alphabet[rng.IntN(len(alphabet))])
		out = append(out, doc[i+1:]...)
	}
	return out
}

func pick(rng *rand.Rand, options ...string) string { return options[rng.IntN(len(options))] }

func TestExtractModelFromRealBodies(t *testing.T) {
	for _, b := range bodytest.All() {
		t.Run(b.Name, func(t *testing.T) {
			model, found, err := ExtractModel(b.Body)
			if err != nil || !found || model != b.Model {
				t.Fatalf("ExtractModel = %q, %v, %v; want %q", model, found, err, b.Model)
			}
			checkAgainstReference(t, b.Body)
		})
	}
}

// TestStreamRefusesAtThePieceThatShowsIt: an error shows in the Write of the
// piece that has it, in the first piece (scanned whole) and in later ones
// (scanned by the coroutine), and Finish gives ExtractModel's answer.
func TestStreamRefusesAtThePieceThatShowsIt(t *testing.T) {
	pieces := func(ps ...string) [][]byte {
		var out [][]byte
		doc := ""
		for _, p := range ps {
			doc += p
			out = append(out, []byte(doc))
		}
		return out
	}
	for _, c := range []struct {
		docs    [][]byte
		failsAt int // the Write that fails; -1 for none
	}{
		{pieces(`{"model":"m",]`), 0},
		{pieces(`{"model":"m",`, `]`), 1},
		{pieces(`{"model":"m", `, `"p":"ab`, "\x01", `"}`), 2},
		{pieces(`{"mo`, `del":"m`, `x","a":[1,`, `2]}`), -1},
		{pieces(`{"model":"m"}`), -1},
		{pieces(`{"model":"m"}`, ` `, ` x`), 2},
	} {
		var st Stream
		failed := -1
		for i, doc := range c.docs {
			if err := st.Write(doc); err != nil {
				failed = i
				break
			}
		}
		if failed != c.failsAt {
			t.Errorf("%q: the write of piece %d failed, want %d", c.docs[len(c.docs)-1], failed, c.failsAt)
		}
		doc := c.docs[len(c.docs)-1]
		m, found, err := st.Finish(doc)
		wm, wfound, werr := ExtractModel(doc)
		if m != wm || found != wfound || fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%q: Finish %q %v %v; ExtractModel %q %v %v", doc, m, found, err, wm, wfound, werr)
		}
		st.Close()
	}
}

// TestStreamCloseReleasesTheScan: a scan abandoned mid-body (the client went
// away) ends when its Stream is closed, instead of waiting forever for the
// next piece.
func TestStreamCloseReleasesTheScan(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 100 {
		var st Stream
		_ = st.Write([]byte(`{"model":"m","messages":[`))
		_ = st.Write([]byte(`{"model":"m","messages":[{"role":"user","content":"hel`))
		st.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after closing 100 abandoned streams", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
