// Package splitmix is SplitMix64, the generator behind the simulator's step
// jitter and the stand-in tokenizer's text and block hashes: one uint64 of
// state (copy it to replay a sequence) and the same draws on every platform.
package splitmix

// Source is a SplitMix64 state; any value, zero included, is a valid seed.
type Source uint64

// Next advances s and returns its next 64 bits.
func (s *Source) Next() uint64 {
	*s += 0x9e3779b97f4a7c15
	return Mix(uint64(*s))
}

// Mix is SplitMix64's finalizer: every input bit affects every output bit, so
// it also spreads a weak hash's low bits.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
