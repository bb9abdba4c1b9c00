package kvevents

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func fuzzSeeds(f *testing.F) {
	toks := tokens(32, 9)
	f.Add(encodeWire(1, []wireEvent{{Kind: BlockStored, Hashes: []uint64{1, 2}, Parent: ptr[uint64](7), Tokens: toks, BlockSize: 16,
		LoRAID: ptr(1), LoRAName: ptr("sql"), Medium: ptr("GPU")}}, false))
	f.Add(encodeWire(2, []wireEvent{{Kind: BlockStored, Hashes: []uint64{3}, Tokens: toks[:16], BlockSize: 16, HashBytes: true, Fields: 9, Group: ptr(0)},
		{Kind: BlockRemoved, Hashes: []uint64{3}, AsMap: true, Fields: 3}}, true))
	f.Add(encodeWire(3, []wireEvent{{Kind: BlockRemoved, Hashes: []uint64{1}}}, false))
	b, _ := msgpack.Marshal([]any{1.0, []any{[]any{"AllBlocksCleared"}}, 0})
	f.Add(b)
	f.Add([]byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00})
}

// FuzzDecode: the decoder never panics; what it accepts is valid msgpack
// (the library decodes it too) and every store carries its blocks' tokens;
// applying it to an index keeps the index consistent.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d Decoder
		batch, err := d.Decode(payload)
		if err != nil {
			return
		}
		// Skip, not Unmarshal: the library cannot decode a map with integer
		// keys into an interface, which is valid msgpack.
		r := bytes.NewReader(payload)
		if err := msgpack.NewDecoder(r).Skip(); err != nil || r.Len() != 0 {
			t.Fatalf("decoded a batch the msgpack library does not read as one value: %v, %d bytes left", err, r.Len())
		}
		x := NewIndex(16)
		x.SetExact("p", true)
		for _, ev := range batch.Events {
			if ev.Kind == BlockStored && len(ev.Tokens) != len(ev.Hashes)*ev.BlockSize {
				t.Fatalf("store of %d blocks of %d with %d tokens", len(ev.Hashes), ev.BlockSize, len(ev.Tokens))
			}
		}
		a := x.Apply("p", batch.Events)
		if held := x.Holds("p"); held > a.Stored {
			t.Fatalf("holds %d blocks after %d stores", held, a.Stored)
		}
		// Every block a root store brought in (and no later event removed)
		// is found by keying its tokens.
		for _, ev := range batch.Events {
			if ev.Kind != BlockStored || ev.HasParent || ev.BlockSize != 16 || len(ev.Hashes) == 0 || len(batch.Events) != 1 {
				continue
			}
			keys := AppendBlockKeys(nil, eventSeed(&ev), ev.Tokens, 16, 0)
			if got := x.Match(keys, nil)[0]; int(got) != len(keys) {
				t.Fatalf("a stored chain of %d blocks matches %d", len(keys), got)
			}
		}
	})
}

// FuzzStream drives a stream with arbitrary sequence numbers, replays and
// payloads: it never panics, and an exact pod's index holds only what was
// applied since the last loss.
func FuzzStream(f *testing.F) {
	f.Add([]byte{0, 1, 2, 5, 3, 3, 0, 9}, true)
	f.Add([]byte{4, 4, 1, 0, 200, 7}, false)
	f.Fuzz(func(t *testing.T, script []byte, replay bool) {
		s, x, now := newTestStream(replay)
		pub := &fakePublisher{buffer: 8}
		from, ask := s.connected(now)
		for i, op := range script {
			now = now.Add(300 * 1e6)
			switch op % 6 {
			case 0, 1: // a batch arrives
				m := pub.publish()
				if op%2 == 1 && len(pub.batches) > 1 {
					m = message{seq: m.seq, payload: pub.batches[int(op)%len(pub.batches)]}
				}
				from, ask = s.live(m, now)
			case 2: // a batch is lost
				pub.publish()
			case 3: // the replay socket answers
				if ask {
					from, ask = pub.replay(s, from, now)
				}
			case 4: // the publisher restarts
				pub.restart()
			case 5: // time passes
				var drop bool
				from, ask, drop = s.tick(now)
				if drop {
					from, ask = s.connected(now)
				}
			}
			if i > 64 {
				break
			}
		}
		if st := s.status(); st.Blocks > int(st.Batches) {
			t.Fatalf("%d blocks held after %d batches", st.Blocks, st.Batches)
		}
		_ = x
	})
}
