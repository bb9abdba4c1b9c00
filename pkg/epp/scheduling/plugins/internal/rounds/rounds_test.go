package rounds

import (
	"slices"
	"testing"
)

// lowestFree chooses the lowest index not chosen yet.
func lowestFree(chosen []int) int {
	i := 0
	for slices.Contains(chosen, i) {
		i++
	}
	return i
}

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		dst           []int
		n, candidates int
		want          []int
	}{
		{nil, 2, 3, []int{0, 1}},
		{nil, 5, 3, []int{0, 1, 2}},
		{[]int{0, 7}, 2, 3, []int{0, 7, 0, 1}}, // what dst held is not "chosen"
		{nil, 0, 3, nil},
		{nil, 2, 0, nil},
	} {
		if got := Pick(tc.dst, tc.n, tc.candidates, lowestFree); !slices.Equal(got, tc.want) {
			t.Errorf("Pick(%v, %d, %d) = %v, want %v", tc.dst, tc.n, tc.candidates, got, tc.want)
		}
	}
}
