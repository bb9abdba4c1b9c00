package sim

import "github.com/igw-dev/igw/internal/splitmix"

// symmetric draws the per-step jitter from a pod's generator: a uniform value
// in [-1, 1). The generator is one uint64, so copying a pod replays its future.
func symmetric(s *splitmix.Source) float64 { return float64(s.Next()>>11)/(1<<52) - 1 }
