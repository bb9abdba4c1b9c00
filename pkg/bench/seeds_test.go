package bench

import (
	"slices"
	"testing"
)

func TestSeeds(t *testing.T) {
	held := Seeds{First: 11, Count: 3}
	if got := held.List(); !slices.Equal(got, []uint64{11, 12, 13}) {
		t.Errorf("List() = %v, want 11 12 13", got)
	}
	if held.String() != "11..13" || held.Comma() != "11, 12, 13" {
		t.Errorf("String() = %q, Comma() = %q", held.String(), held.Comma())
	}
	if one := FirstN(1); one.String() != "1" || !slices.Equal(one.List(), []uint64{1}) {
		t.Errorf("FirstN(1) = %v %v", one, one.List())
	}
}
