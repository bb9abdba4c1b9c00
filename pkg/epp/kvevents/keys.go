package kvevents

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// The index names a block by its own key: a hash chained over the token IDs
// from the start of the prompt (seeded with the LoRA adapter, whose KV differs
// for the same tokens), computed the same way from an engine's BlockStored
// tokens and from a request's prompt. The engine's hashes are not reproduced:
// they depend on the engine's hash algorithm and its random seed
// (PYTHONHASHSEED), so the index only uses them to recognise blocks in later
// events. Keys are process-local.

// Seed is the key chain's seed for an adapter ("" for the base model).
func Seed(adapter string) uint64 { return xxhash.Sum64String("igw/kv-block/" + adapter) }

// chainKey is the key of a block given its parent's key (or the seed).
func chainKey(prev uint64, block []uint32) uint64 {
	var buf [256]byte
	var d xxhash.Digest
	d.ResetWithSeed(prev)
	for len(block) > 0 {
		n := min(len(block), len(buf)/4)
		for i, t := range block[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], t)
		}
		_, _ = d.Write(buf[:4*n])
		block = block[n:]
	}
	return d.Sum64()
}

// AppendBlockKeys appends the keys of tokens' full blocks of blockSize to
// dst, at most maxBlocks of them (0: all): what a request's prompt would be
// cached as.
func AppendBlockKeys(dst []uint64, seed uint64, tokens []uint32, blockSize, maxBlocks int) []uint64 {
	prev := seed
	for i := 0; i+blockSize <= len(tokens) && (maxBlocks <= 0 || i/blockSize < maxBlocks); i += blockSize {
		prev = chainKey(prev, tokens[i:i+blockSize])
		dst = append(dst, prev)
	}
	return dst
}
