// Package cputime reads the CPU time a process or a thread has used, for
// benchmarks on a shared machine: CPU time does not count the time the
// scheduler gave to other processes, which wall-clock time does. Where the
// platform does not say, the functions return 0.
package cputime

import "time"

// Process is the CPU time (user and system) the process has used.
func Process() time.Duration { return usage(true) }

// Thread is the CPU time the calling OS thread has used; the caller locks
// its goroutine to the thread (runtime.LockOSThread) around the measurement.
func Thread() time.Duration { return usage(false) }
