package tokenizer

import "github.com/igw-dev/igw/internal/splitmix"

// Prefix caching identifies a KV-cache block by a hash chained over every token
// from the start of the prompt up to the block's end, so equal hashes mean equal
// prefixes. The seed separates caches that must not share blocks (a LoRA adapter
// computes different KV for the same tokens).

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
)

// HashSeed returns the chain seed for a namespace (e.g. a LoRA adapter name; ""
// for the base model).
func HashSeed(namespace string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(namespace); i++ {
		h = (h ^ uint64(namespace[i])) * fnvPrime
	}
	return splitmix.Mix(h) // spreads FNV's weak low bits
}

// ChainHash returns the hash of a block given the hash of the block before it (or
// the seed for the first block).
func ChainHash(prev uint64, block []uint32) uint64 {
	h := prev
	for _, t := range block {
		h = (h ^ uint64(t)) * fnvPrime
	}
	return splitmix.Mix(h) // spreads FNV's weak low bits
}

// BlockHashes appends to dst the chained hashes of every full blockSize-token
// block of tokens; a trailing partial block has no hash.
func BlockHashes(dst []uint64, seed uint64, tokens []uint32, blockSize int) []uint64 {
	prev := seed
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		prev = ChainHash(prev, tokens[i:i+blockSize])
		dst = append(dst, prev)
	}
	return dst
}
