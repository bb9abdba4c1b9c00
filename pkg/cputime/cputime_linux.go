package cputime

import (
	"syscall"
	"time"
	"unsafe"
)

// Linux's CPU-time clocks (clock_gettime), precise to the nanosecond where
// getrusage counts scheduler ticks.
const (
	clockProcessCPUTime = 2
	clockThreadCPUTime  = 3
)

func usage(process bool) time.Duration {
	clock := clockThreadCPUTime
	if process {
		clock = clockProcessCPUTime
	}
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
