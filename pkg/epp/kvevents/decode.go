package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// EventKind is the type of a KV cache event.
type EventKind uint8

// The event types vLLM publishes (its tags BlockStored, BlockRemoved,
// AllBlocksCleared).
const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// String is vLLM's tag of the kind.
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "unknown"
}

// Event is one KV cache event. Hashes are the engine's block hashes folded to
// 64 bits: vLLM sends either the low 64 bits as an integer (its default) or
// the 32-byte digest, whose last eight bytes read big-endian are those same
// 64 bits.
type Event struct {
	Kind EventKind
	// Hashes are the blocks stored (in token order) or removed.
	Hashes []uint64
	// Parent is the engine hash of the block before the first stored one;
	// HasParent is false when the first block starts a prompt.
	Parent    uint64
	HasParent bool
	// Tokens are the stored blocks' token IDs, BlockSize per block.
	Tokens    []uint32
	BlockSize int
	// LoRAName is the adapter the blocks were computed with ("" for the base
	// model). LoRAID is vLLM's integer adapter ID, which older versions send
	// without the name (0: none).
	LoRAName string
	LoRAID   int64
}

// Batch is one KVEventBatch.
type Batch struct {
	// TS is the engine's wall-clock time of the batch, in Unix seconds.
	TS     float64
	Events []Event
}

// Decoder decodes vLLM's msgpack batches, reusing its memory: a decoded
// Batch (and its events' slices) is valid until the next Decode. It accepts
// both encodings msgspec produces for vLLM's structs: arrays (array_like, the
// batch always and the events in vLLM's releases) with fields in declaration
// order, and maps keyed by field name with the tag under "type". Fields it
// does not know are skipped; events for another medium than the GPU or
// another KV cache group than the first are dropped, since only the GPU's
// first group answers a prefix lookup. Not safe for concurrent use.
type Decoder struct {
	batch  Batch
	hashes []uint64
	tokens []uint32
	r      reader
	// spans record where each event's slices start in hashes and tokens.
	spans []span
	names map[string]string
}

type span struct{ hashes, tokens int }

// ErrMalformed wraps every decoding error.
var ErrMalformed = errors.New("kvevents: malformed event batch")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// Decode reads one batch payload (the third frame of a message).
func (d *Decoder) Decode(payload []byte) (*Batch, error) {
	d.r = reader{b: payload}
	d.batch.Events, d.hashes, d.tokens, d.spans = d.batch.Events[:0], d.hashes[:0], d.tokens[:0], d.spans[:0]
	if err := d.decodeBatch(); err != nil {
		return nil, err
	}
	if d.r.i != len(payload) {
		return nil, malformed("%d bytes after the batch", len(payload)-d.r.i)
	}
	// Slices into hashes and tokens are set last: both may have moved while growing.
	for i := range d.batch.Events {
		ev, s := &d.batch.Events[i], d.spans[i]
		ev.Hashes = d.hashes[s.hashes : s.hashes+len(ev.Hashes) : s.hashes+len(ev.Hashes)]
		ev.Tokens = d.tokens[s.tokens : s.tokens+len(ev.Tokens) : s.tokens+len(ev.Tokens)]
	}
	return &d.batch, nil
}

func (d *Decoder) decodeBatch() error {
	r := &d.r
	if n, ok := r.arrayLen(); ok {
		if n < 2 {
			return malformed("a batch array has %d fields, want ts and events", n)
		}
		var err error
		if d.batch.TS, err = r.number(); err != nil {
			return fmt.Errorf("batch ts: %w", err)
		}
		if err := d.decodeEvents(); err != nil {
			return err
		}
		for range n - 2 { // data_parallel_rank and later fields
			if err := r.skip(0); err != nil {
				return err
			}
		}
		return nil
	}
	n, ok := r.mapLen()
	if !ok {
		return malformed("a batch must be an array or a map, found byte 0x%02x", r.peek())
	}
	seenEvents := false
	for range n {
		key, err := r.str()
		if err != nil {
			return err
		}
		switch string(key) {
		case "ts":
			if d.batch.TS, err = r.number(); err != nil {
				return fmt.Errorf("batch ts: %w", err)
			}
		case "events":
			if err := d.decodeEvents(); err != nil {
				return err
			}
			seenEvents = true
		default:
			if err := r.skip(0); err != nil {
				return err
			}
		}
	}
	if !seenEvents {
		return malformed("a batch map without events")
	}
	return nil
}

func (d *Decoder) decodeEvents() error {
	n, ok := d.r.arrayLen()
	if !ok {
		return malformed("events must be an array")
	}
	for i := range n {
		if err := d.decodeEvent(); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// event field positions in vLLM's array layout, after the tag.
const (
	fieldHashes = iota
	fieldParent
	fieldTokens
	fieldBlockSize
	fieldLoRAID
	fieldMedium
	fieldLoRAName
	fieldExtraKeys
	fieldGroup
	fieldUnknown
)

// removedFields maps BlockRemoved's positions onto BlockStored's names.
var removedFields = [...]int{fieldHashes, fieldMedium, fieldGroup}

var fieldNames = map[string]int{
	"block_hashes": fieldHashes, "parent_block_hash": fieldParent, "token_ids": fieldTokens,
	"block_size": fieldBlockSize, "lora_id": fieldLoRAID, "medium": fieldMedium, "lora_name": fieldLoRAName,
	"extra_keys": fieldExtraKeys, "group_idx": fieldGroup,
}

func (d *Decoder) decodeEvent() error {
	r := &d.r
	ev := Event{}
	sp := span{hashes: len(d.hashes), tokens: len(d.tokens)}
	keep, seen := true, 0
	field := func(f int) error {
		if f != fieldUnknown && seen&(1<<f) != 0 {
			return malformed("field %d given twice", f)
		}
		seen |= 1 << f
		var err error
		switch f {
		case fieldHashes:
			err = d.hashList(&ev)
		case fieldParent:
			if r.isNil() {
				break
			}
			ev.HasParent = true
			ev.Parent, err = r.hash()
		case fieldTokens:
			err = d.tokenList(&ev)
		case fieldBlockSize:
			var n int64
			n, err = r.integer()
			if err == nil && (n < 1 || n > 1<<20) {
				err = malformed("block_size %d", n)
			}
			ev.BlockSize = int(n)
		case fieldLoRAID:
			if !r.isNil() {
				ev.LoRAID, err = r.integer()
			}
		case fieldMedium:
			if !r.isNil() {
				var m []byte
				m, err = r.str()
				keep = keep && string(m) == "GPU"
			}
		case fieldLoRAName:
			if !r.isNil() {
				var name []byte
				name, err = r.str()
				ev.LoRAName = d.intern(name)
			}
		case fieldGroup:
			if !r.isNil() {
				var g int64
				g, err = r.integer()
				keep = keep && g == 0
			}
		default:
			err = r.skip(0)
		}
		return err
	}
	if n, ok := r.arrayLen(); ok {
		if n == 0 {
			return malformed("an event array without a tag")
		}
		tag, err := r.str()
		if err != nil {
			return fmt.Errorf("tag: %w", err)
		}
		if ev.Kind, err = kindOf(tag); err != nil {
			return err
		}
		for pos := range n - 1 {
			f := fieldUnknown
			switch ev.Kind {
			case BlockStored:
				f = min(pos, fieldUnknown)
			case BlockRemoved:
				if pos < len(removedFields) {
					f = removedFields[pos]
				}
			}
			if err := field(f); err != nil {
				return err
			}
		}
	} else if n, ok := r.mapLen(); ok {
		for range n {
			key, err := r.str()
			if err != nil {
				return err
			}
			if string(key) == "type" {
				tag, err := r.str()
				if err != nil {
					return fmt.Errorf("tag: %w", err)
				}
				if ev.Kind, err = kindOf(tag); err != nil {
					return err
				}
				continue
			}
			f, known := fieldNames[string(key)]
			if !known {
				f = fieldUnknown
			}
			if err := field(f); err != nil {
				return err
			}
		}
		if ev.Kind == 0 {
			return malformed("an event map without a type")
		}
	} else {
		return malformed("an event must be an array or a map, found byte 0x%02x", r.peek())
	}
	switch ev.Kind {
	case BlockStored:
		const need = 1<<fieldHashes | 1<<fieldParent | 1<<fieldTokens | 1<<fieldBlockSize
		if seen&need != need {
			return malformed("BlockStored lacks block_hashes, parent_block_hash, token_ids or block_size")
		}
		if len(ev.Tokens) != len(ev.Hashes)*ev.BlockSize {
			return malformed("BlockStored has %d tokens for %d blocks of %d", len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
		}
	case BlockRemoved:
		if seen&(1<<fieldHashes) == 0 {
			return malformed("BlockRemoved lacks block_hashes")
		}
	}
	if !keep {
		d.hashes, d.tokens = d.hashes[:sp.hashes], d.tokens[:sp.tokens]
		return nil
	}
	d.batch.Events = append(d.batch.Events, ev)
	d.spans = append(d.spans, sp)
	return nil
}

func kindOf(tag []byte) (EventKind, error) {
	switch string(tag) {
	case "BlockStored":
		return BlockStored, nil
	case "BlockRemoved":
		return BlockRemoved, nil
	case "AllBlocksCleared":
		return AllBlocksCleared, nil
	}
	return 0, malformed("unknown event type %q", tag)
}

// hashList appends the event's block hashes; ev.Hashes gets their count.
func (d *Decoder) hashList(ev *Event) error {
	n, ok := d.r.arrayLen()
	if !ok {
		return malformed("block_hashes must be an array")
	}
	for range n {
		h, err := d.r.hash()
		if err != nil {
			return err
		}
		d.hashes = append(d.hashes, h)
	}
	ev.Hashes = d.hashes[len(d.hashes)-n:] // its length counts; Decode re-slices
	return nil
}

// tokenList appends the event's token IDs; ev.Tokens gets their count.
func (d *Decoder) tokenList(ev *Event) error {
	n, ok := d.r.arrayLen()
	if !ok {
		return malformed("token_ids must be an array")
	}
	start := len(d.tokens)
	d.tokens = growUint32(d.tokens, n)
	toks := d.tokens[start : start+n]
	b, i := d.r.b, d.r.i
	for k := range toks {
		if i >= len(b) {
			return malformed("token_ids cut short")
		}
		c := b[i]
		switch {
		case c <= 0x7f:
			toks[k] = uint32(c)
			i++
		case c == 0xcc && i+1 < len(b):
			toks[k] = uint32(b[i+1])
			i += 2
		case c == 0xcd && i+2 < len(b):
			toks[k] = uint32(binary.BigEndian.Uint16(b[i+1:]))
			i += 3
		case c == 0xce && i+4 < len(b):
			toks[k] = binary.BigEndian.Uint32(b[i+1:])
			i += 5
		default:
			d.r.i = i
			v, err := d.r.integer()
			if err != nil {
				return fmt.Errorf("token_ids[%d]: %w", k, err)
			}
			if v < 0 || v > math.MaxUint32 {
				return malformed("token_ids[%d] = %d is not a 32-bit token ID", k, v)
			}
			toks[k] = uint32(v)
			i = d.r.i
		}
	}
	d.r.i = i
	ev.Tokens = toks
	return nil
}

func growUint32(s []uint32, n int) []uint32 {
	if cap(s)-len(s) < n {
		s = append(s[:cap(s)], make([]uint32, n+cap(s))...)[:len(s)]
	}
	return s[:len(s)+n]
}

// intern returns name as a string, allocating once per distinct adapter.
func (d *Decoder) intern(name []byte) string {
	if s, ok := d.names[string(name)]; ok {
		return s
	}
	if d.names == nil {
		d.names = map[string]string{}
	}
	if len(d.names) > 4096 {
		clear(d.names) // a stream naming endless adapters must not grow the decoder
	}
	s := string(name)
	d.names[s] = s
	return s
}

// reader walks msgpack bytes. Every length is checked against the bytes
// left, so a hostile length cannot make it allocate.
type reader struct {
	b []byte
	i int
}

func (r *reader) peek() byte {
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

func (r *reader) need(n int) error {
	if n < 0 || len(r.b)-r.i < n {
		return malformed("cut short at byte %d", r.i)
	}
	return nil
}

func (r *reader) isNil() bool {
	if r.peek() == 0xc0 && r.i < len(r.b) {
		r.i++
		return true
	}
	return false
}

// length reads a big-endian length of w bytes after the type byte.
func (r *reader) length(w int) (int, error) {
	if err := r.need(1 + w); err != nil {
		return 0, err
	}
	p := r.b[r.i+1:]
	var n uint64
	switch w {
	case 1:
		n = uint64(p[0])
	case 2:
		n = uint64(binary.BigEndian.Uint16(p))
	case 4:
		n = uint64(binary.BigEndian.Uint32(p))
	}
	r.i += 1 + w
	if n > uint64(len(r.b)-r.i) {
		return 0, malformed("length %d beyond the %d bytes left", n, len(r.b)-r.i)
	}
	return int(n), nil
}

// containerLen reads an array (map) header; each element needs a byte at
// least (two for a map entry), which bounds the length.
func (r *reader) containerLen(fix, fixMask, c16, c32 byte, per int) (int, bool) {
	c := r.peek()
	var n int
	var err error
	switch {
	case r.i >= len(r.b):
		return 0, false
	case c&^fixMask == fix:
		n = int(c & fixMask)
		r.i++
	case c == c16:
		n, err = r.length(2)
	case c == c32:
		n, err = r.length(4)
	default:
		return 0, false
	}
	if err != nil || n*per > len(r.b)-r.i {
		r.i = len(r.b) // poison: the next read fails
		return 0, false
	}
	return n, true
}

func (r *reader) arrayLen() (int, bool) { return r.containerLen(0x90, 0x0f, 0xdc, 0xdd, 1) }
func (r *reader) mapLen() (int, bool)   { return r.containerLen(0x80, 0x0f, 0xde, 0xdf, 2) }

// str reads a str or bin value without copying.
func (r *reader) str() ([]byte, error) {
	if err := r.need(1); err != nil {
		return nil, err
	}
	c := r.b[r.i]
	var n int
	var err error
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
		r.i++
		if err := r.need(n); err != nil {
			return nil, err
		}
	case c == 0xd9 || c == 0xc4:
		n, err = r.length(1)
	case c == 0xda || c == 0xc5:
		n, err = r.length(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.length(4)
	default:
		return nil, malformed("want a string, found byte 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s, nil
}

// integer reads any msgpack integer that fits int64 (uint64 above it is
// returned as its bit pattern, which is what a hash needs).
func (r *reader) integer() (int64, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	c := r.b[r.i]
	switch {
	case c <= 0x7f:
		r.i++
		return int64(c), nil
	case c >= 0xe0:
		r.i++
		return int64(int8(c)), nil
	}
	w := 0
	switch c {
	case 0xcc, 0xd0:
		w = 1
	case 0xcd, 0xd1:
		w = 2
	case 0xce, 0xd2:
		w = 4
	case 0xcf, 0xd3:
		w = 8
	default:
		return 0, malformed("want an integer, found byte 0x%02x", c)
	}
	if err := r.need(1 + w); err != nil {
		return 0, err
	}
	p := r.b[r.i+1:]
	r.i += 1 + w
	switch c {
	case 0xcc:
		return int64(p[0]), nil
	case 0xcd:
		return int64(binary.BigEndian.Uint16(p)), nil
	case 0xce:
		return int64(binary.BigEndian.Uint32(p)), nil
	case 0xcf:
		return int64(binary.BigEndian.Uint64(p)), nil
	case 0xd0:
		return int64(int8(p[0])), nil
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(p))), nil
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(p))), nil
	}
	return int64(binary.BigEndian.Uint64(p)), nil
}

// number reads a float or an integer as float64.
func (r *reader) number() (float64, error) {
	switch r.peek() {
	case 0xcb:
		if err := r.need(9); err != nil {
			return 0, err
		}
		v := math.Float64frombits(binary.BigEndian.Uint64(r.b[r.i+1:]))
		r.i += 9
		return v, nil
	case 0xca:
		if err := r.need(5); err != nil {
			return 0, err
		}
		v := math.Float32frombits(binary.BigEndian.Uint32(r.b[r.i+1:]))
		r.i += 5
		return float64(v), nil
	}
	n, err := r.integer()
	return float64(n), err
}

// hash reads an ExternalBlockHash: an integer, or bytes folded to their last
// eight bytes read big-endian (shorter ones padded in front with zeros).
func (r *reader) hash() (uint64, error) {
	c := r.peek()
	if c == 0xc4 || c == 0xc5 || c == 0xc6 || (c >= 0xa0 && c <= 0xbf) || c == 0xd9 || c == 0xda || c == 0xdb {
		b, err := r.str()
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, malformed("an empty block hash")
		}
		var h uint64
		for _, x := range b[max(0, len(b)-8):] {
			h = h<<8 | uint64(x)
		}
		return h, nil
	}
	n, err := r.integer()
	return uint64(n), err
}

// maxDepth bounds the nesting skip follows (extra keys are tuples of tuples).
const maxDepth = 32

// skip passes over one value of any type.
func (r *reader) skip(depth int) error {
	if depth > maxDepth {
		return malformed("nested deeper than %d", maxDepth)
	}
	if err := r.need(1); err != nil {
		return err
	}
	c := r.b[r.i]
	fixed := func(n int) error {
		if err := r.need(n); err != nil {
			return err
		}
		r.i += n
		return nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		r.i++
		return nil
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		n, ok := r.mapLen()
		if !ok {
			return malformed("bad map at byte %d", r.i)
		}
		for range 2 * n {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		n, ok := r.arrayLen()
		if !ok {
			return malformed("bad array at byte %d", r.i)
		}
		for range n {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case c >= 0xa0 && c <= 0xbf, c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
		_, err := r.str()
		return err
	case c >= 0xcc && c <= 0xd3:
		_, err := r.integer()
		return err
	case c == 0xca:
		return fixed(5)
	case c == 0xcb:
		return fixed(9)
	case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 plus the type byte
		return fixed(2 + 1<<(c-0xd4))
	case c == 0xc7 || c == 0xc8 || c == 0xc9:
		w := map[byte]int{0xc7: 1, 0xc8: 2, 0xc9: 4}[c]
		n, err := r.length(w)
		if err != nil {
			return err
		}
		return fixed(n + 1)
	}
	return malformed("unknown type byte 0x%02x", c)
}
