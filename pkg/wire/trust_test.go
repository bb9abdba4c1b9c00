package wire

import "testing"

func TestIsReservedHeader(t *testing.T) {
	for name, want := range map[string]bool{
		HeaderModelName:           true,
		"X-Gateway-Model-Name":    true,
		HeaderDestinationEndpoint: true,
		HeaderPriority:            true,
		"X-IGW-Debug":             true,
		HeaderClientRegion:        true,
		"x-gatewayish":            false,
		"authorization":           false,
		"content-type":            false,
		"x-request-id":            false,
	} {
		if got := IsReservedHeader(name); got != want {
			t.Errorf("IsReservedHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
