package kvevents

import (
	"errors"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func ptr[T any](v T) *T { return &v }

func tokens(n int, base uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)*977
	}
	return out
}

// TestDecodeLayouts reads the layouts vLLM's releases and msgspec produce:
// array-like events with 5 to 9 fields, map events, a map batch, integer and
// digest hashes, and token IDs of every integer width.
func TestDecodeLayouts(t *testing.T) {
	toks := []uint32{0, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 5, 6, 7, 8, 9, 10, 11, 12}
	stored := Event{Kind: BlockStored, Hashes: []uint64{1<<63 + 5}, Parent: 42, HasParent: true, Tokens: toks, BlockSize: 16}
	for _, tc := range []struct {
		name  string
		ev    wireEvent
		asMap bool
		want  Event
	}{
		{"vLLM current", wireEvent{Kind: BlockStored, Hashes: stored.Hashes, Parent: ptr[uint64](42), Tokens: toks, BlockSize: 16,
			Medium: ptr("GPU")}, false, stored},
		{"oldest (no medium)", wireEvent{Kind: BlockStored, Hashes: stored.Hashes, Parent: ptr[uint64](42), Tokens: toks, BlockSize: 16,
			Fields: 5}, false, stored},
		{"newest (extra keys, group 0)", wireEvent{Kind: BlockStored, Hashes: stored.Hashes, Parent: ptr[uint64](42), Tokens: toks,
			BlockSize: 16, Fields: 9, Group: ptr(0)}, false, stored},
		{"digest hashes", wireEvent{Kind: BlockStored, Hashes: stored.Hashes, Parent: ptr[uint64](42), Tokens: toks, BlockSize: 16,
			HashBytes: true}, false, stored},
		{"map event", wireEvent{Kind: BlockStored, Hashes: stored.Hashes, Parent: ptr[uint64](42), Tokens: toks, BlockSize: 16,
			Fields: 9, AsMap: true}, true, stored},
		{"lora", wireEvent{Kind: BlockStored, Hashes: []uint64{7}, Tokens: toks, BlockSize: 16, LoRAID: ptr(3), LoRAName: ptr("sql")},
			false, Event{Kind: BlockStored, Hashes: []uint64{7}, Tokens: toks, BlockSize: 16, LoRAID: 3, LoRAName: "sql"}},
		{"removed", wireEvent{Kind: BlockRemoved, Hashes: []uint64{1, 2, 3}, Medium: ptr("GPU")}, false,
			Event{Kind: BlockRemoved, Hashes: []uint64{1, 2, 3}}},
		{"removed, map", wireEvent{Kind: BlockRemoved, Hashes: []uint64{9}, AsMap: true, Fields: 3}, true,
			Event{Kind: BlockRemoved, Hashes: []uint64{9}}},
	} {
		var d Decoder
		b, err := d.Decode(encodeWire(3.25, []wireEvent{tc.ev, {Kind: BlockRemoved, Hashes: []uint64{11}}}, tc.asMap))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if b.TS != 3.25 || len(b.Events) != 2 {
			t.Fatalf("%s: ts %v, %d events", tc.name, b.TS, len(b.Events))
		}
		if !eventsEqual(b.Events[0], tc.want) || b.Events[1].Kind != BlockRemoved || !slices.Equal(b.Events[1].Hashes, []uint64{11}) {
			t.Fatalf("%s: decoded %+v, want %+v", tc.name, b.Events, tc.want)
		}
	}
}

func eventsEqual(a, b Event) bool {
	return a.Kind == b.Kind && slices.Equal(a.Hashes, b.Hashes) && a.Parent == b.Parent && a.HasParent == b.HasParent &&
		slices.Equal(a.Tokens, b.Tokens) && a.BlockSize == b.BlockSize && a.LoRAID == b.LoRAID && a.LoRAName == b.LoRAName
}

// TestDecodeDropsOtherTiers: CPU-offload and other-group events do not
// describe the GPU prefix cache.
func TestDecodeDropsOtherTiers(t *testing.T) {
	var d Decoder
	b, err := d.Decode(encodeWire(1, []wireEvent{
		{Kind: BlockStored, Hashes: []uint64{1}, Tokens: tokens(16, 0), BlockSize: 16, Medium: ptr("CPU")},
		{Kind: BlockStored, Hashes: []uint64{2}, Tokens: tokens(16, 0), BlockSize: 16, Fields: 9, Group: ptr(1)},
		{Kind: BlockRemoved, Hashes: []uint64{3}, Medium: ptr("CPU")},
		{Kind: BlockStored, Hashes: []uint64{4}, Tokens: tokens(16, 9), BlockSize: 16},
	}, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 1 || b.Events[0].Hashes[0] != 4 || !slices.Equal(b.Events[0].Tokens, tokens(16, 9)) {
		t.Fatalf("kept %+v, want the GPU store of block 4 alone", b.Events)
	}
}

// TestDecodeRejects: every malformed batch is an ErrMalformed naming the problem.
func TestDecodeRejects(t *testing.T) {
	good := encodeWire(1, []wireEvent{{Kind: BlockStored, Hashes: []uint64{1, 2}, Tokens: tokens(32, 0), BlockSize: 16}}, false)
	enc := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	for name, payload := range map[string][]byte{
		"empty":          nil,
		"not a batch":    enc("hello"),
		"short array":    enc([]any{1.0}),
		"events not arr": enc([]any{1.0, "x"}),
		"unknown tag":    enc([]any{1.0, []any{[]any{"BlockMoved", []any{1}}}}),
		"no tag":         enc([]any{1.0, []any{[]any{}}}),
		"token count":    encodeWire(1, []wireEvent{{Kind: BlockStored, Hashes: []uint64{1, 2}, Tokens: tokens(16, 0), BlockSize: 16}}, false),
		"missing fields": enc([]any{1.0, []any{[]any{"BlockStored", []any{1}}}}),
		"negative token": enc([]any{1.0, []any{[]any{"BlockStored", []any{1}, nil, append(make([]any, 15), -1), 16}}}),
		"block size 0":   enc([]any{1.0, []any{[]any{"BlockStored", []any{}, nil, []any{}, 0}}}),
		"empty hash":     enc([]any{1.0, []any{[]any{"BlockRemoved", []any{[]byte{}}}}}),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0xc0),
		"huge length":    {0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"map no events":  enc(map[string]any{"ts": 1.0}),
		"twice hashes":   enc([]any{1.0, []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}}}}),
	} {
		var d Decoder
		if name == "twice hashes" { // a map with a repeated key needs hand encoding
			payload = []byte{0x92, 0x01, 0x91, 0x83, 0xa4, 't', 'y', 'p', 'e', 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
				0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0x01,
				0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0x02}
		}
		if _, err := d.Decode(payload); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// TestDecoderReusesMemory: decoding a batch of the same shape again
// allocates nothing.
func TestDecoderReusesMemory(t *testing.T) {
	payload := encodeWire(1, []wireEvent{
		{Kind: BlockStored, Hashes: []uint64{1, 2, 3, 4}, Parent: ptr[uint64](9), Tokens: tokens(64, 300), BlockSize: 16, LoRAName: ptr("sql")},
		{Kind: BlockRemoved, Hashes: []uint64{5, 6}},
	}, false)
	var d Decoder
	if _, err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(payload) }); n != 0 {
		t.Fatalf("%v allocations per decode", n)
	}
}
