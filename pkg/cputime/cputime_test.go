package cputime

import (
	"runtime"
	"testing"
)

// Spinning on a locked thread shows as thread and process CPU time.
func TestTimesGrowWithWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU time is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, p0 := Thread(), Process()
	x := uint64(1)
	for Thread()-t0 < 20e6 { // 20 ms of CPU
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 || Process()-p0 < Thread()-t0-1e6 {
		t.Fatalf("process CPU %v, thread CPU %v", Process()-p0, Thread()-t0)
	}
}
