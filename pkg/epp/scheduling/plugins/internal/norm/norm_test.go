package norm

import (
	"slices"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

func TestLowerIsBetter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		stale  []int
		want   []float64
	}{
		{"linear between lowest and highest", []float64{0, 5, 10}, nil, []float64{1, 0.5, 0}},
		{"all equal score 1", []float64{3, 3}, nil, []float64{1, 1}},
		{"a stale endpoint scores 0 and does not stretch the range", []float64{0, 4, 8}, []int{0}, []float64{0, 1, 0}},
		{"only stale endpoints", []float64{1, 2}, []int{0, 1}, []float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cands := make([]*datastore.View, len(tc.values))
			for i := range cands {
				cands[i] = &datastore.View{ID: int32(i), Stale: slices.Contains(tc.stale, i)}
			}
			got := make([]float64, len(cands))
			LowerIsBetter(cands, got, func(v *datastore.View) float64 { return tc.values[v.ID] })
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scores %v, want %v", got, tc.want)
			}
		})
	}
}
