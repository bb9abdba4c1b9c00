package kvevents

import (
	"bytes"
	"encoding/binary"

	"github.com/vmihailenco/msgpack/v5"
)

// The tests encode batches with the msgpack library, in the layouts vLLM's
// releases produce, independently of the decoder under test.

// wireEvent is an event as a test encodes it.
type wireEvent struct {
	Kind      EventKind
	Hashes    []uint64
	Parent    *uint64
	Tokens    []uint32
	BlockSize int
	LoRAID    *int
	Medium    *string
	LoRAName  *string
	// Fields is how many fields after the tag to write (0: vLLM's current 7 for
	// a store, 2 for a removal); more adds extra_keys and group_idx.
	Fields int
	Group  *int
	// AsMap writes the event as a map keyed by field name.
	AsMap bool
	// HashBytes writes hashes as 32-byte digests whose last 8 bytes are the hash.
	HashBytes bool
}

func digest(h uint64) []byte {
	b := bytes.Repeat([]byte{0xab}, 32)
	binary.BigEndian.PutUint64(b[24:], h)
	return b
}

func encodeWire(ts float64, events []wireEvent, batchAsMap bool) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	hash := func(ev wireEvent, h uint64) {
		if ev.HashBytes {
			_ = enc.EncodeBytes(digest(h))
		} else {
			_ = enc.EncodeUint(h)
		}
	}
	hashes := func(ev wireEvent) {
		_ = enc.EncodeArrayLen(len(ev.Hashes))
		for _, h := range ev.Hashes {
			hash(ev, h)
		}
	}
	optInt := func(p *int) {
		if p == nil {
			_ = enc.EncodeNil()
		} else {
			_ = enc.EncodeInt(int64(*p))
		}
	}
	optStr := func(p *string) {
		if p == nil {
			_ = enc.EncodeNil()
		} else {
			_ = enc.EncodeString(*p)
		}
	}
	if batchAsMap {
		_ = enc.EncodeMapLen(3)
		_ = enc.EncodeString("ts")
		_ = enc.EncodeFloat64(ts)
		_ = enc.EncodeString("data_parallel_rank")
		_ = enc.EncodeInt(0)
		_ = enc.EncodeString("events")
	} else {
		_ = enc.EncodeArrayLen(3)
		_ = enc.EncodeFloat64(ts)
	}
	_ = enc.EncodeArrayLen(len(events))
	for _, ev := range events {
		type field struct {
			name  string
			write func()
		}
		var fields []field
		switch ev.Kind {
		case BlockStored:
			fields = []field{
				{"block_hashes", func() { hashes(ev) }},
				{"parent_block_hash", func() {
					if ev.Parent == nil {
						_ = enc.EncodeNil()
					} else {
						hash(ev, *ev.Parent)
					}
				}},
				{"token_ids", func() {
					_ = enc.EncodeArrayLen(len(ev.Tokens))
					for _, t := range ev.Tokens {
						_ = enc.EncodeUint(uint64(t))
					}
				}},
				{"block_size", func() { _ = enc.EncodeInt(int64(ev.BlockSize)) }},
				{"lora_id", func() { optInt(ev.LoRAID) }},
				{"medium", func() { optStr(ev.Medium) }},
				{"lora_name", func() { optStr(ev.LoRAName) }},
				{"extra_keys", func() {
					_ = enc.EncodeArrayLen(1)
					_ = enc.EncodeArrayLen(2)
					_ = enc.EncodeString("mm-hash")
					_ = enc.EncodeInt(3)
				}},
				{"group_idx", func() { optInt(ev.Group) }},
			}
			if ev.Fields == 0 {
				ev.Fields = 7
			}
		case BlockRemoved:
			fields = []field{
				{"block_hashes", func() { hashes(ev) }},
				{"medium", func() { optStr(ev.Medium) }},
				{"group_idx", func() { optInt(ev.Group) }},
			}
			if ev.Fields == 0 {
				ev.Fields = 2
			}
		}
		fields = fields[:min(ev.Fields, len(fields))]
		if ev.AsMap {
			_ = enc.EncodeMapLen(len(fields) + 1)
			_ = enc.EncodeString("type")
			_ = enc.EncodeString(ev.Kind.String())
			for _, f := range fields {
				_ = enc.EncodeString(f.name)
				f.write()
			}
			continue
		}
		_ = enc.EncodeArrayLen(len(fields) + 1)
		_ = enc.EncodeString(ev.Kind.String())
		for _, f := range fields {
			f.write()
		}
	}
	if !batchAsMap {
		_ = enc.EncodeInt(0)
	}
	return buf.Bytes()
}

// fromEvents writes decoded-style events in vLLM's current layout.
func fromEvents(events []Event) []wireEvent {
	out := make([]wireEvent, len(events))
	for i, ev := range events {
		w := wireEvent{Kind: ev.Kind, Hashes: ev.Hashes, Tokens: ev.Tokens, BlockSize: ev.BlockSize}
		if ev.HasParent {
			p := ev.Parent
			w.Parent = &p
		}
		if ev.LoRAName != "" {
			n := ev.LoRAName
			w.LoRAName = &n
		}
		gpu := "GPU"
		w.Medium = &gpu
		out[i] = w
	}
	return out
}

func encodeEvents(events []Event) []byte { return encodeWire(1.5, fromEvents(events), false) }
