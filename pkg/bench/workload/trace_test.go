package workload

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

func common[T comparable](a, b []T) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Two prompts share exactly the blocks their ids share, no token and no
// cache block more: in the text, in the simulator's KV-cache block hashes and
// in the picker's prefix index, whatever its block size.
func TestBlocksShareExactlyTheCommonIDs(t *testing.T) {
	for _, c := range []struct {
		a, b   []uint32
		na, nb int
		shared int // tokens
	}{
		{[]uint32{1, 2, 3}, []uint32{1, 2, 4}, 1400, 1100, 1024},
		{[]uint32{1, 2, 3}, []uint32{1, 2, 3}, 1400, 1100, 1100}, // a partial last block
		{[]uint32{5, 2}, []uint32{1, 2}, 1000, 1000, 0},          // same id at a different place: nothing shared
		{[]uint32{0}, []uint32{64}, 512, 512, 0},                 // ids with a common marker letter
		{[]uint32{0, 1}, []uint32{0, 1 << 23}, 1024, 1024, 512},
	} {
		pa, pb := BlocksText(c.a, c.na), BlocksText(c.b, c.nb)
		ta, tb := tokenizer.Tokenize(pa), tokenizer.Tokenize(pb)
		if len(ta) != c.na || len(tb) != c.nb {
			t.Fatalf("%v: %d and %d tokens, want %d and %d", c, len(ta), len(tb), c.na, c.nb)
		}
		if got := common(ta, tb); got != c.shared {
			t.Errorf("%v / %v: %d tokens shared, want %d", c.a, c.b, got, c.shared)
		}
		if got := common([]byte(pa), []byte(pb)); got < 4*c.shared || got >= 4*c.shared+4 {
			t.Errorf("%v / %v: %d bytes of text shared, want %d..%d", c.a, c.b, got, 4*c.shared, 4*c.shared+3)
		}
		seed := tokenizer.HashSeed("")
		ha, hb := tokenizer.BlockHashes(nil, seed, ta, sim.BlockSize), tokenizer.BlockHashes(nil, seed, tb, sim.BlockSize)
		if got := common(ha, hb); got != c.shared/sim.BlockSize {
			t.Errorf("%v / %v: %d KV blocks shared, want %d", c.a, c.b, got, c.shared/sim.BlockSize)
		}
		for _, chars := range []int{64, 256} {
			ia, ib := prefixindex.Hash(nil, "m", pa, chars, 0), prefixindex.Hash(nil, "m", pb, chars, 0)
			if got := common(ia, ib); got != 4*c.shared/chars {
				t.Errorf("%v / %v: %d prefix-index blocks of %d characters shared, want %d", c.a, c.b, got, chars, 4*c.shared/chars)
			}
		}
	}
}

// A trace scenario releases its records at their scaled times, with prompts of
// their lengths (cut to the fleet's context) and their exact outputs.
func TestTraceRequests(t *testing.T) {
	dir := t.TempDir()
	trace := `{"timestamp": 0, "input_length": 1400, "output_length": 20, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 4]}
{"timestamp": 3000, "input_length": 200000, "output_length": 5, "hash_ids": [` + ids(391) + `]}
{"timestamp": 9000, "input_length": 10, "output_length": 5, "hash_ids": [9]}
`
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "name: x\nwarmup: 400ms\n" + fleet + "workload:\n  trace: {file: t.jsonl, format: mooncake, rateScale: 2, duration: 8s}\n"
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(sc, 1, sc.MaxContext())
	if err != nil {
		t.Fatal(err)
	}
	reqs := drain(t, g)
	if len(reqs) != 3 { // the fourth arrives after the window
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, want := range []struct {
		ms, input, output int
		counted           bool
	}{{0, 1400, 20, false}, {500, 1100, 10, true}, {1500, sc.MaxContext() - 5, 5, true}} {
		r := reqs[i]
		if r.Arrival.Milliseconds() != int64(want.ms) || len(r.Tokens) != want.input || r.OutputTokens != want.output || r.Counted != want.counted {
			t.Errorf("request %d: at %v, %d tokens, %d out, counted %v; want %+v", i, r.Arrival, len(r.Tokens), r.OutputTokens, r.Counted, want)
		}
	}
	if got := common(reqs[0].Tokens, reqs[1].Tokens); got != 1024 {
		t.Errorf("the first two share %d tokens, want 1024", got)
	}
}

func ids(n int) string {
	var s []string
	for i := range n {
		s = append(s, strconv.Itoa(1000+i))
	}
	return strings.Join(s, ", ")
}
