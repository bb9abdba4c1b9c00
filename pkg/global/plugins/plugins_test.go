package plugins

import (
	"slices"
	"testing"
)

func TestRegistryHoldsEveryGlobalPlugin(t *testing.T) {
	want := []string{"kv-cache-utilization", "max-score-picker", "member-error-rate", "member-headroom", "member-health",
		"member-predicted-ttft", "member-prefix-locality", "member-serves-model", "queue", "region-pin", "region-proximity",
		"region-shaping", "running-requests", "weighted-random-picker"}
	if got := NewRegistry().Types(); !slices.Equal(got, want) {
		t.Fatalf("types %v", got)
	}
	for _, typ := range want {
		if _, err := NewRegistry().New(typ, "", nil); err != nil {
			t.Errorf("%s without parameters: %v", typ, err)
		}
	}
}
