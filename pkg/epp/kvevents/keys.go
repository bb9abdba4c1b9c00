package kvevents

import (
	"math/bits"

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

// chainKey is the key of a block given its parent's key (or the seed): a
// multiply-fold hash (as wyhash's) of the token IDs, four at a time, into
// the parent's key. The parent is folded back in after every step, so no
// token value can erase the prefix the key stands for.
func chainKey(prev uint64, block []uint32) uint64 {
	const k1, k2, k3 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
	h := prev
	i := 0
	for ; i+4 <= len(block); i += 4 {
		a := uint64(block[i]) | uint64(block[i+1])<<32
		b := uint64(block[i+2]) | uint64(block[i+3])<<32
		h = mum(a^k1^h, b^k2) ^ bits.RotateLeft64(h, 29)
	}
	for ; i < len(block); i++ {
		h = mum(uint64(block[i])^k1^h, k2) ^ bits.RotateLeft64(h, 29)
	}
	return nonZero(mum(h^k3, uint64(len(block))^k1))
}

// mum folds the 128-bit product of a and b.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// nonZero keeps 0 free as the index tables' empty-slot marker.
func nonZero(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
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
