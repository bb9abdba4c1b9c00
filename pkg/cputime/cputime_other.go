//go:build !linux

package cputime

import "time"

func usage(bool) time.Duration { return 0 }
