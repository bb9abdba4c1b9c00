package kvevents

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func stored(hashes []uint64, parent *uint64, toks []uint32, lora string) Event {
	ev := Event{Kind: BlockStored, Hashes: hashes, Tokens: toks, BlockSize: 16, LoRAName: lora}
	if parent != nil {
		ev.Parent, ev.HasParent = *parent, true
	}
	return ev
}

func matchOf(x *Index, keys []uint64, pods ...string) []int32 {
	out, _ := x.MatchPods(keys, pods, nil, nil)
	return out
}

// TestIndexFollowsEvents: stores chain through parents, removals and clears
// take blocks away, copies are counted, adapters are kept apart, and a
// request's keys computed from its tokens find the blocks.
func TestIndexFollowsEvents(t *testing.T) {
	x := NewIndex(16)
	prompt := tokens(80, 1000) // 5 blocks
	keys := AppendBlockKeys(nil, Seed(""), prompt, 16, 0)
	for _, p := range []string{"a", "b"} {
		x.SetExact(p, true)
	}
	x.Apply("a", []Event{stored([]uint64{1, 2, 3}, nil, prompt[:48], "")})
	x.Apply("a", []Event{stored([]uint64{4}, ptr[uint64](3), prompt[48:64], "")})
	x.Apply("b", []Event{stored([]uint64{21, 22}, nil, prompt[:32], "")}) // another engine seed: other hashes
	if got := matchOf(x, keys, "a", "b", "c"); !slices.Equal(got, []int32{4, 2, -1}) {
		t.Fatalf("matched %v, want [4 2 -1] (c has no stream)", got)
	}
	a := x.Apply("a", []Event{{Kind: BlockRemoved, Hashes: []uint64{2, 77}}})
	if a.Removed != 1 || a.UnknownRemoved != 1 {
		t.Fatalf("removal counts %+v", a)
	}
	if got := matchOf(x, keys, "a", "b"); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("after removing a's block 2: %v, want [1 2]", got)
	}
	if a := x.Apply("a", []Event{stored([]uint64{5}, ptr[uint64](999), prompt[64:80], "")}); a.Orphans != 1 {
		t.Fatalf("a store under an unknown parent: %+v, want one orphan", a)
	}
	// A second copy of a block survives one removal.
	x.Apply("b", []Event{stored([]uint64{21}, nil, prompt[:16], ""), {Kind: BlockRemoved, Hashes: []uint64{21}}})
	if got := matchOf(x, keys, "b"); got[0] != 2 {
		t.Fatalf("b after a copy and one removal: %v, want 2", got)
	}
	x.Apply("b", []Event{{Kind: AllBlocksCleared}})
	if got := matchOf(x, keys, "a", "b"); !slices.Equal(got, []int32{1, 0}) || x.Holds("b") != 0 {
		t.Fatalf("after b's clear: %v (b holds %d)", got, x.Holds("b"))
	}
	// Adapters: same tokens, another chain.
	x.Apply("b", []Event{stored([]uint64{31, 32}, nil, prompt[:32], "sql")})
	if got := matchOf(x, keys, "b"); got[0] != 0 {
		t.Fatalf("adapter blocks matched a base-model prompt: %v", got)
	}
	if got := matchOf(x, AppendBlockKeys(nil, Seed("sql"), prompt, 16, 0), "b"); got[0] != 2 {
		t.Fatalf("adapter prompt: %v, want 2", got)
	}
	if a := x.Apply("b", []Event{{Kind: BlockStored, Hashes: []uint64{40}, Tokens: tokens(32, 0), BlockSize: 32}}); a.WrongBlockSize != 1 {
		t.Fatalf("32-token blocks: %+v", a)
	}
	x.SetExact("a", false)
	if got := matchOf(x, keys, "a"); got[0] != -1 {
		t.Fatalf("a pod not exact matched %v", got)
	}
	x.RemovePod("a")
	x.RemovePod("b")
	if x.Blocks() != 0 {
		t.Fatalf("%d blocks left after removing every pod", x.Blocks())
	}
}

// TestMatchAgainstBruteForce compares Match with a direct count over random
// shared-prefix holdings of 150 pods (three bitmap words).
func TestMatchAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := NewIndex(16)
	const pods = 150
	prompts := make([][]uint32, 8)
	for i := range prompts {
		prompts[i] = append(tokens(64, 1), tokens(16*(4+i), uint32(1e6*(i+1)))...)
	}
	held := map[string][]int{} // pod → blocks held per prompt (a prefix)
	names := make([]string, pods)
	for p := range pods {
		names[p] = fmt.Sprintf("pod-%d", p)
		x.SetExact(names[p], true)
		held[names[p]] = make([]int, len(prompts))
		for i, pr := range prompts {
			n := rng.IntN(len(pr)/16 + 1)
			if n == 0 {
				continue
			}
			hashes := make([]uint64, n)
			for k := range hashes {
				hashes[k] = uint64(p)<<32 | uint64(i)<<16 | uint64(k)
			}
			x.Apply(names[p], []Event{stored(hashes, nil, pr[:16*n], "")})
			held[names[p]][i] = n
		}
	}
	for i, pr := range prompts {
		keys := AppendBlockKeys(nil, Seed(""), pr, 16, 0)
		got := matchOf(x, keys, names...)
		for p, name := range names {
			// Prompts share their first 4 blocks: another prompt's holding counts there.
			want := held[name][i]
			for j := range prompts {
				want = max(want, min(held[name][j], 4))
			}
			if int(got[p]) != want {
				t.Fatalf("prompt %d, %s: matched %d, want %d", i, name, got[p], want)
			}
		}
	}
}

// TestMatchAgainstBruteForceWithEvictions: long prompts (lookups span
// several chunks of the walk) stored in chained pieces by pods spanning
// several bitmap words, then arbitrary blocks evicted; each pod's match is
// the run of leading blocks it still holds, by keys and by tokens alike.
func TestMatchAgainstBruteForceWithEvictions(t *testing.T) {
	const pods = 150
	rng, x := rand.New(rand.NewPCG(3, 4)), NewIndex(16)
	var prompts [6][]uint32 // 40 to 139 blocks
	for i := range prompts {
		prompts[i] = tokens(16*(40+rng.IntN(100)), uint32(1e7*(i+1)))
	}
	held, names := map[string][][]bool{}, make([]string, pods) // pod → prompt → block held
	for p := range pods {
		names[p] = fmt.Sprintf("pod-%d", p)
		x.SetExact(names[p], true)
		held[names[p]] = make([][]bool, len(prompts))
		for i, pr := range prompts {
			hash := func(k int) uint64 { return uint64(p)<<32 | uint64(i)<<20 | uint64(k) }
			blocks := make([]bool, len(pr)/16)
			held[names[p]][i] = blocks
			n := rng.IntN(len(blocks) + 1)
			for start := 0; start < n; {
				end := min(n, start+1+rng.IntN(40))
				hashes := make([]uint64, end-start)
				for k := range hashes {
					hashes[k] = hash(start + k)
				}
				var parent *uint64
				if start > 0 {
					h := hash(start - 1)
					parent = &h
				}
				x.Apply(names[p], []Event{stored(hashes, parent, pr[16*start:16*end], "")})
				for k := start; k < end; k++ {
					blocks[k] = true
				}
				start = end
			}
			removed := []uint64{1<<63 | uint64(p)} // never stored
			for k := range n {
				if rng.IntN(10) == 0 {
					removed = append(removed, hash(k))
					blocks[k] = false
				}
			}
			if a := x.Apply(names[p], []Event{{Kind: BlockRemoved, Hashes: removed}}); a.Removed != len(removed)-1 || a.UnknownRemoved != 1 {
				t.Fatalf("removal counted %+v", a)
			}
		}
	}
	for i, pr := range prompts {
		byKeys := matchOf(x, AppendBlockKeys(nil, Seed(""), pr, 16, 0), names...)
		byTokens, _ := x.MatchPrompt(Seed(""), pr, 0, names, nil, nil)
		for p, name := range names {
			want := 0
			for want < len(held[name][i]) && held[name][i][want] {
				want++
			}
			if int(byKeys[p]) != want || int(byTokens[p]) != want {
				t.Fatalf("prompt %d, %s: matched %d by keys, %d by tokens, want %d", i, name, byKeys[p], byTokens[p], want)
			}
		}
	}
}
