//go:build race

package sim

// The race detector makes HTTP and JSON several times slower.
func init() { httpAllowance *= 5 }
