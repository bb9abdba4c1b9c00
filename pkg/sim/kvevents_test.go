package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// TestHashBlockIsCanonicalCBOR holds the hand-written CBOR to a library's
// canonical encoding of vLLM's (parent, tokens, extra keys) tuple, for token
// IDs of every integer width.
func TestHashBlockIsCanonicalCBOR(t *testing.T) {
	enc, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	parent := NoneHash("0")
	tokens := []uint32{0, 1, 23, 24, 255, 256, 65535, 65536, 1 << 31, ^uint32(0), 7, 8, 9, 10, 11, 12}
	for _, lora := range []string{"", "sql-lora", string(make([]byte, 300))} {
		var extra any
		if lora != "" {
			extra = []any{lora}
		}
		want, err := enc.Marshal([]any{parent[:], tokens, extra})
		if err != nil {
			t.Fatal(err)
		}
		h, got := HashBlock(nil, parent, tokens, lora)
		if !bytes.Equal(got, want) {
			t.Fatalf("lora %q: CBOR\n got %x\nwant %x", lora, got, want)
		}
		if h != sha256.Sum256(want) {
			t.Fatalf("lora %q: hash is not SHA-256 of the CBOR", lora)
		}
	}
	seed, _ := enc.Marshal("42")
	if NoneHash("42") != sha256.Sum256(seed) {
		t.Fatal("NoneHash is not SHA-256 of the seed's CBOR text string")
	}
	if h := (BlockHash{24: 1, 31: 2}); h.Int() != 1<<56|2 {
		t.Fatalf("Int() = %x, want the last 8 bytes big-endian", h.Int())
	}
}

// cacheModel is what a subscriber knows from the events alone.
type cacheModel struct {
	t       *testing.T
	held    map[BlockHash]int
	stored  int
	removed int
	cleared int
}

func (m *cacheModel) PublishKVEvents(_ time.Duration, events []KVEvent) {
	for _, ev := range events {
		switch ev.Kind {
		case kvevents.BlockStored:
			if len(ev.TokenIDs) != len(ev.BlockHashes)*BlockSize {
				m.t.Fatalf("BlockStored with %d tokens for %d blocks", len(ev.TokenIDs), len(ev.BlockHashes))
			}
			parent := NoneHash("seed")
			if ev.HasParent {
				parent = ev.Parent
			}
			for i, h := range ev.BlockHashes {
				want, _ := HashBlock(nil, parent, ev.TokenIDs[i*BlockSize:(i+1)*BlockSize], ev.LoRAName)
				if h != want {
					m.t.Fatalf("block %d of a BlockStored is not vLLM's hash of its parent and tokens", i)
				}
				parent = h
				m.held[h]++
				m.stored++
			}
		case kvevents.BlockRemoved:
			for _, h := range ev.BlockHashes {
				if m.held[h] == 0 {
					m.t.Fatalf("BlockRemoved of a block never stored")
				}
				if m.held[h]--; m.held[h] == 0 {
					delete(m.held, h)
				}
				m.removed++
			}
		case kvevents.AllBlocksCleared:
			clear(m.held)
			m.cleared++
		}
	}
}

// engineBlocks is the engine's real prefix cache, by vLLM hash.
func engineBlocks(e *Engine) map[BlockHash]int {
	out := map[BlockHash]int{}
	for _, b := range e.kv.index {
		out[e.kv.events.ext[b]]++
	}
	return out
}

// TestKVEventsFollowTheBlockCache runs shared-prefix traffic, with LoRA and
// base-model requests, through a cache small enough to evict, and holds the
// state rebuilt from the events to the engine's own cache after every step.
func TestKVEventsFollowTheBlockCache(t *testing.T) {
	e, err := New(Config{GPU: "H100", Model: "llama-3.1-8b", KVCacheTokens: 4096, MaxLoras: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := &cacheModel{t: t, held: map[BlockHash]int{}}
	if err := e.EnableKVEvents(m, "seed"); err != nil {
		t.Fatal(err)
	}
	system := tokenizer.GenerateText(1, 300)
	now := time.Duration(0)
	for i := range 60 {
		adapter := ""
		if i%3 == 0 {
			adapter = "sql-lora"
		}
		prompt := tokenizer.Tokenize(system + tokenizer.GenerateText(uint64(100+i%7), 200+i*13%300))
		if err := e.Submit(Request{ID: uint64(i + 1), Adapter: adapter, Prompt: prompt, OutputTokens: 40}, now); err != nil {
			t.Fatal(err)
		}
		now += 30 * time.Millisecond
		e.Advance(now)
		if got, want := m.held, engineBlocks(e); !sameBlocks(got, want) {
			t.Fatalf("after request %d: events say %d blocks, the cache holds %d", i, len(got), len(want))
		}
	}
	for {
		next, busy := e.NextEventTime()
		if !busy {
			break
		}
		e.Advance(next)
	}
	if !sameBlocks(m.held, engineBlocks(e)) {
		t.Fatal("after the last step the events and the cache differ")
	}
	if m.removed == 0 || m.stored <= m.removed {
		t.Fatalf("stored %d, removed %d: the test should evict and keep some", m.stored, m.removed)
	}
	if err := e.EnableKVEvents(m, "x"); err != ErrKVEventsLate {
		t.Fatalf("enabling events on a used engine: %v, want ErrKVEventsLate", err)
	}
	if !e.ResetPrefixCache(now + time.Second) {
		t.Fatal("reset of an idle cache refused")
	}
	if m.cleared != 1 || len(m.held) != 0 || len(e.kv.index) != 0 {
		t.Fatalf("after reset: %d clears, %d blocks by events, %d in the cache", m.cleared, len(m.held), len(e.kv.index))
	}
}

func sameBlocks(a, b map[BlockHash]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestEncodeKVEventBatchIsVLLMsLayout decodes the encoding generically and
// checks vLLM's array layout field by field, in both hash forms.
func TestEncodeKVEventBatchIsVLLMsLayout(t *testing.T) {
	h1, h2 := NoneHash("a"), NoneHash("b")
	events := []KVEvent{
		{Kind: kvevents.BlockStored, BlockHashes: []BlockHash{h1, h2}, Parent: h2, HasParent: true,
			TokenIDs: make([]uint32, 2*BlockSize), LoRAID: 3, LoRAName: "sql"},
		{Kind: kvevents.BlockStored, BlockHashes: []BlockHash{h1}, TokenIDs: make([]uint32, BlockSize)},
		{Kind: kvevents.BlockRemoved, BlockHashes: []BlockHash{h2}},
		{Kind: kvevents.AllBlocksCleared},
	}
	for _, ints := range []bool{true, false} {
		var batch []any
		if err := msgpack.Unmarshal(EncodeKVEventBatch(nil, 12.5, events, ints), &batch); err != nil {
			t.Fatal(err)
		}
		hash := func(h BlockHash) any {
			if ints {
				return h.Int()
			}
			return h[:]
		}
		tokens := func(n int) []any { return slices.Repeat([]any{int8(0)}, n) }
		want := []any{12.5, []any{
			[]any{"BlockStored", []any{hash(h1), hash(h2)}, hash(h2), tokens(32), int8(16), int8(3), "GPU", "sql"},
			[]any{"BlockStored", []any{hash(h1)}, nil, tokens(16), int8(16), nil, "GPU", nil},
			[]any{"BlockRemoved", []any{hash(h2)}, "GPU"},
			[]any{"AllBlocksCleared"},
		}, int8(0)}
		if !deepEqualLoose(batch, want) {
			t.Fatalf("int hashes %v: decoded\n%#v\nwant\n%#v", ints, batch, want)
		}
	}
}

// deepEqualLoose compares decoded msgpack, treating integer widths alike.
func deepEqualLoose(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !deepEqualLoose(x[i], y[i]) {
				return false
			}
		}
		return true
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	if ai, ok := asUint(a); ok {
		bi, ok := asUint(b)
		return ok && ai == bi
	}
	return a == b
}

// asUint reads any sized integer (msgpack decodes each in the smallest that
// holds it) as its 64 bits.
func asUint(v any) (uint64, bool) {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return uint64(rv.Int()), true
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint(), true
	}
	return 0, false
}

// TestKVEventPublisherOverZMQ: batches arrive as [topic, sequence, payload]
// on a SUB socket, and the ROUTER socket resends them from a sequence on,
// ending with -1, as vLLM's publisher does.
func TestKVEventPublisherOverZMQ(t *testing.T) {
	cfg, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://*:0","replay_endpoint":"tcp://*:0","topic":"kv-events"}`)
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Unix(1000, 0)
	pub, err := NewKVEventPublisher(cfg, "127.0.0.1", func(d time.Duration) time.Time { return origin.Add(d) })
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.Dial(pub.Endpoint); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv-events"); err != nil {
		t.Fatal(err)
	}
	ev := []KVEvent{{Kind: kvevents.BlockRemoved, BlockHashes: []BlockHash{NoneHash("x")}}}
	// The subscription reaches the publisher asynchronously: publish until one arrives.
	got := make(chan zmq4.Msg, 16)
	go func() {
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			got <- msg
		}
	}()
	var first zmq4.Msg
	for first.Frames == nil {
		pub.PublishKVEvents(time.Second, ev)
		select {
		case first = <-got:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no batch reached the subscriber")
		}
	}
	if len(first.Frames) != 3 || string(first.Frames[0]) != "kv-events" || len(first.Frames[1]) != 8 {
		t.Fatalf("message frames %q", first.Frames)
	}
	if want := EncodeKVEventBatch(nil, 1001, ev, true); !bytes.Equal(first.Frames[2], want) {
		t.Fatalf("payload %x, want %x", first.Frames[2], want)
	}
	seq := binary.BigEndian.Uint64(first.Frames[1])

	dealer := zmq4.NewDealer(ctx)
	defer dealer.Close()
	if err := dealer.Dial(pub.ReplayEndpoint); err != nil {
		t.Fatal(err)
	}
	if err := dealer.Send(zmq4.NewMsgFrom(nil, seqBytes(seq))); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for {
		msg, err := dealer.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Frames) != 3 || len(msg.Frames[0]) != 0 {
			t.Fatalf("replay frames %q", msg.Frames)
		}
		s := binary.BigEndian.Uint64(msg.Frames[1])
		if s == ^uint64(0) {
			break
		}
		seqs = append(seqs, s)
	}
	if len(seqs) == 0 || seqs[0] != seq || seqs[len(seqs)-1] != pub.Sequence()-1 {
		t.Fatalf("replay from %d sent %v (next sequence %d)", seq, seqs, pub.Sequence())
	}
}

func TestParseKVEventsConfig(t *testing.T) {
	c, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv-events"}`)
	if err != nil || !c.Enabled() || c.BufferSteps != DefaultKVEventsBufferSteps || !c.IntBlockHashes {
		t.Fatalf("%+v, %v", c, err)
	}
	for _, bad := range []string{`{"enable_kv_cache_event":true}`, `{"publisher":"kafka"}`, `[]`, `{"endpoint":"ipc:///x","enable_kv_cache_events":true}`, `{} {}`} {
		if _, err := ParseKVEventsConfig(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	var o KVEventsConfig
	if err := o.KVEventsFromEnv(func(k string) (string, bool) {
		return map[string]string{"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": "0", "PYTHONHASHSEED": "7"}[k], true
	}); err != nil || o.IntBlockHashes || o.HashSeed != "7" || !o.HashSeedSet {
		t.Fatalf("from env: %+v, %v", o, err)
	}
}
