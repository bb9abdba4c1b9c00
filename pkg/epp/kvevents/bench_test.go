package kvevents

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/igw-dev/igw/pkg/cputime"
)

// churnPayloads builds, for each pod, a cycle of batches in vLLM's layout
// that keeps the cache in a steady state: batch i stores a 32-block chain
// (a 512-token prompt) and evicts the chain stored `held` batches earlier.
func churnPayloads(pods, cycle, held int) [][][]byte {
	out := make([][][]byte, pods)
	chain := func(p, c int) []uint64 {
		h := make([]uint64, 32)
		for k := range h {
			h[k] = uint64(p)<<48 | uint64(c)<<16 | uint64(k)
		}
		return h
	}
	for p := range pods {
		for i := range cycle {
			evs := []Event{stored(chain(p, i), nil, tokens(512, uint32(p*cycle+i)*512), "")}
			evs = append(evs, Event{Kind: BlockRemoved, Hashes: chain(p, (i-held+cycle)%cycle)})
			out[p] = append(out[p], encodeEvents(evs))
		}
	}
	return out
}

// BenchmarkIngest measures what a subscriber does per batch: decode the
// msgpack payload and apply it to the index (8 pods, each storing 32 blocks
// and evicting 32 per batch, 512 chains held per pod). Run with -cpu 1; the
// figures are block events (stored plus removed) per second of wall-clock
// time and per second of the process's CPU time (which a busy machine's
// other processes do not inflate).
func BenchmarkIngest(b *testing.B) {
	const pods, cycle, held = 8, 1024, 512
	payloads := churnPayloads(pods, cycle, held)
	x := NewIndex(16)
	var d Decoder
	names := make([]string, pods)
	for p := range names {
		names[p] = fmt.Sprintf("10.0.0.%d:8000", p)
	}
	apply := func(i int) int {
		p := i % pods
		batch, err := d.Decode(payloads[p][(i/pods)%cycle])
		if err != nil {
			b.Fatal(err)
		}
		a := x.Apply(names[p], batch.Events)
		return a.Stored + a.Removed
	}
	for i := range pods * cycle { // one full cycle: the steady state
		apply(i)
	}
	events := 0
	b.ReportAllocs()
	start, cpu := time.Now(), cputime.Process()
	i := 0
	for b.Loop() {
		events += apply(i)
		i++
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "block-events/s")
	if used := cputime.Process() - cpu; used > 0 {
		b.ReportMetric(float64(events)/used.Seconds(), "block-events/cpu-s")
	}
	b.ReportMetric(float64(x.Blocks()), "blocks-held")
}

// BenchmarkDecodeWithLibrary decodes the same batches with the msgpack
// library's generic decoder, for comparison: why the decoder is hand-written.
func BenchmarkDecodeWithLibrary(b *testing.B) {
	payloads := churnPayloads(1, 64, 32)[0]
	start, cpu, events := time.Now(), cputime.Process(), 0
	for i := 0; b.Loop(); i++ {
		var v []any
		if err := msgpack.Unmarshal(payloads[i%len(payloads)], &v); err != nil {
			b.Fatal(err)
		}
		events += 64
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "block-events/s")
	if used := cputime.Process() - cpu; used > 0 {
		b.ReportMetric(float64(events)/used.Seconds(), "block-events/cpu-s")
	}
}

// BenchmarkIndexMemory builds the exact index for 64 pods and 1M distinct
// blocks (prompt chains of 64 blocks) and reports the heap it takes, in MiB,
// with every block on one pod and on two (2M pod-block entries). Run with
// -benchtime 1x.
func BenchmarkIndexMemory(b *testing.B) {
	const pods, blocks, chainLen = 64, 1 << 20, 64
	for _, holders := range []int{1, 2} {
		b.Run(fmt.Sprintf("holders=%d", holders), func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				x := NewIndex(16)
				toks := make([]uint32, 16*chainLen)
				for c := range blocks / chainLen {
					for i := range toks {
						toks[i] = uint32(c*len(toks) + i)
					}
					for h := range holders {
						p := (c + h*17) % pods
						hashes := make([]uint64, chainLen)
						for k := range hashes {
							hashes[k] = uint64(p)<<40 | uint64(c)<<8 | uint64(k)
						}
						x.Apply(fmt.Sprintf("10.0.%d.%d:8000", p/250, p%250), []Event{stored(hashes, nil, toks, "")})
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if x.Blocks() != blocks {
					b.Fatalf("%d blocks indexed", x.Blocks())
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(blocks*holders), "B/pod-block")
				runtime.KeepAlive(x)
			}
		})
	}
}

// BenchmarkMatchPrompt measures the exact lookup of an 8k-token prompt (512
// blocks) that one pod holds whole and every pod holds its first 94 blocks
// (a shared system prompt), among 16 and 128 pods holding 256 such prompts;
// also in CPU time per lookup.
func BenchmarkMatchPrompt(b *testing.B) {
	for _, pods := range []int{16, 128} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			x := NewIndex(16)
			names := make([]string, pods)
			for p := range names {
				names[p] = fmt.Sprintf("10.0.0.%d:8000", p)
				x.SetExact(names[p], true)
			}
			system := tokens(94*16, 7)
			prompts := make([][]uint32, 256)
			for i := range prompts {
				prompts[i] = append(append([]uint32{}, system...), tokens(8192-len(system), uint32(1e6+i*8192))...)
				hashes := make([]uint64, 512)
				for k := range hashes {
					hashes[k] = uint64(i)<<16 | uint64(k)
				}
				x.Apply(names[i%pods], []Event{stored(hashes, nil, prompts[i], "")})
				for p := range pods {
					sys := make([]uint64, 94)
					for k := range sys {
						sys[k] = 1<<60 | uint64(p)<<16 | uint64(k)
					}
					x.Apply(names[p], []Event{stored(sys, nil, system, "")})
				}
			}
			var out, scratch []int32
			i := 0
			cpu := cputime.Process()
			for b.Loop() {
				out, scratch = x.MatchPrompt(Seed(""), prompts[i%len(prompts)], 0, names, out, scratch)
				i++
			}
			if used := cputime.Process() - cpu; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(i), "cpu-ns/op")
			}
			if out[(i-1)%len(prompts)%pods] != 512 {
				b.Fatalf("matched %v", out)
			}
		})
	}
}
