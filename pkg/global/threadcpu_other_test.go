//go:build !linux

package global

import "time"

// threadCPU is unknown outside Linux: the benchmark reports wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
