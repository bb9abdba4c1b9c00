package globalsummary

import (
	"fmt"
	"math/bits"

	"github.com/igw-dev/igw/internal/splitmix"
)

// Digest is a Bloom filter of prefix-block hashes (prefixindex.Hash: chained,
// seeded with the model or adapter name, so one hash names a whole prefix).
// A prompt hashed the same way is matched by walking its blocks until the
// first one the filter lacks.
//
// Sizing: DigestBitsPerBlock bits per block, rounded up to a power of two
// between MinDigestBits and the exporter's maximum (DefaultMaxDigestBits: 1 Mi
// bits, 128 KiB, 104,857 blocks), with DigestHashes positions per block; about
// 0.8% false positives at that load. A false positive lengthens a match by one
// block, and only rarely more: the next block's hash is chained to it.
type Digest struct {
	// BlockTokens is the block size the hashes were cut at, in tokens.
	BlockTokens int `json:"blockTokens"`
	// Hashes is the number of bit positions per block.
	Hashes int `json:"hashes"`
	// Blocks is how many distinct blocks were put in (an estimate: a false
	// positive at insertion is not counted).
	Blocks int `json:"blocks"`
	// Bits is the filter, a power of two of bytes (base64 in JSON).
	Bits []byte `json:"bits"`
}

// Digest sizing.
const (
	DigestBitsPerBlock   = 10
	DigestHashes         = 7
	MinDigestBits        = 1 << 10
	DefaultMaxDigestBits = 1 << 20
	// maxDigestBytes bounds what Validate accepts (8 Mi bits).
	maxDigestBytes  = 1 << 20
	maxBlockTokens  = 4096
	maxDigestHashes = 16
)

// NewDigest returns an empty filter for about blocks blocks of blockTokens
// tokens, no larger than maxBits (rounded down to a power of two; at least MinDigestBits).
func NewDigest(blockTokens, blocks, maxBits int) *Digest {
	maxBits = max(MinDigestBits, maxBits)
	maxBits = 1 << (bits.Len(uint(maxBits)) - 1)
	want := max(MinDigestBits, blocks*DigestBitsPerBlock)
	m := 1 << bits.Len(uint(want-1)) // next power of two >= want
	m = min(m, maxBits)
	return &Digest{BlockTokens: blockTokens, Hashes: DigestHashes, Bits: make([]byte, m/8)}
}

// Capacity is how many blocks the filter holds at DigestBitsPerBlock bits each.
func (d *Digest) Capacity() int { return len(d.Bits) * 8 / DigestBitsPerBlock }

// Validate reports what is wrong with a received digest.
func (d *Digest) Validate() error {
	if d.BlockTokens < 1 || d.BlockTokens > maxBlockTokens {
		return fmt.Errorf("blockTokens is %d; want 1..%d", d.BlockTokens, maxBlockTokens)
	}
	if d.Hashes < 1 || d.Hashes > maxDigestHashes {
		return fmt.Errorf("hashes is %d; want 1..%d", d.Hashes, maxDigestHashes)
	}
	if n := len(d.Bits); n < 8 || n > maxDigestBytes || n&(n-1) != 0 {
		return fmt.Errorf("bits is %d bytes; want a power of two from 8 to %d", n, maxDigestBytes)
	}
	if d.Blocks < 0 {
		return fmt.Errorf("blocks is %d; must not be negative", d.Blocks)
	}
	return nil
}

// step is the double-hashing stride: odd, so that the positions of one block
// are distinct modulo any power of two, and taken from a remix of the hash
// (splitmix64's finaliser) so that it does not follow the start position even
// for hashes that are not random.
func step(h uint64) uint64 { return splitmix.Mix(h) | 1 }

// Add puts block hash h in the filter and reports whether it was new.
func (d *Digest) Add(h uint64) bool {
	mask := uint64(len(d.Bits)*8 - 1)
	s := step(h)
	added := false
	for i := range uint64(d.Hashes) {
		p := (h + i*s) & mask
		b := byte(1) << (p & 7)
		if d.Bits[p>>3]&b == 0 {
			d.Bits[p>>3] |= b
			added = true
		}
	}
	if added {
		d.Blocks++
	}
	return added
}

// Has reports whether h may be in the filter (false: certainly not).
func (d *Digest) Has(h uint64) bool {
	if len(d.Bits) == 0 {
		return false
	}
	mask := uint64(len(d.Bits)*8 - 1)
	s := step(h)
	for i := range uint64(d.Hashes) {
		p := (h + i*s) & mask
		if d.Bits[p>>3]&(byte(1)<<(p&7)) == 0 {
			return false
		}
	}
	return true
}

// MatchLeading is how many leading hashes the filter has, stopping at the first it lacks.
func (d *Digest) MatchLeading(hashes []uint64) int {
	for i, h := range hashes {
		if !d.Has(h) {
			return i
		}
	}
	return len(hashes)
}
