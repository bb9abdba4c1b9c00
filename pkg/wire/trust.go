package wire

import "strings"

// ReservedHeaderPrefixes start the names of the headers that steer routing,
// admission and debugging (the picker protocol's x-gateway-* and igw's own
// x-igw-*). A client must not be able to set them: the gateway and the body
// router remove what a request brings unless its source is trusted, and set
// them themselves.
var ReservedHeaderPrefixes = []string{"x-gateway-", "x-igw-"}

// IsReservedHeader reports whether name (any case) is a reserved header.
func IsReservedHeader(name string) bool {
	name = strings.ToLower(name)
	for _, p := range ReservedHeaderPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
