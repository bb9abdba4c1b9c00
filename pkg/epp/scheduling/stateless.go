package scheduling

import "github.com/igw-dev/igw/pkg/epp/datastore"

// A plugin with no parameters and no state is one function. These adapters
// give such a function its Named and its interface, so its package declares
// only the type name and the function, and the typed argument is the
// compile-time check that the function fits the interface.

// ScoreFunc is a Scorer's Score.
type ScoreFunc func(c *Cycle, cands []*datastore.View, scores []float64)

// FilterFunc is a Filter's Filter.
type FilterFunc func(c *Cycle, in []*datastore.View) []*datastore.View

// PickFunc is a Picker's Pick.
type PickFunc func(c *Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int

type funcScorer struct {
	Named
	score ScoreFunc
}

type funcFilter struct {
	Named
	filter FilterFunc
}

type funcPicker struct {
	Named
	pick PickFunc
}

var (
	_ Scorer = (*funcScorer)(nil)
	_ Filter = (*funcFilter)(nil)
	_ Picker = (*funcPicker)(nil)
)

func (s *funcScorer) Score(c *Cycle, cands []*datastore.View, scores []float64) {
	s.score(c, cands, scores)
}

func (f *funcFilter) Filter(c *Cycle, in []*datastore.View) []*datastore.View {
	return f.filter(c, in)
}

func (p *funcPicker) Pick(c *Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	return p.pick(c, cands, totals, n, dst)
}

// StatelessScorer is the registry factory of a scorer type that is score alone.
func StatelessScorer(typ string, score ScoreFunc) Factory {
	return NoParameters(typ, func(n Named) Plugin { return &funcScorer{n, score} })
}

// StatelessFilter is the registry factory of a filter type that is filter alone.
func StatelessFilter(typ string, filter FilterFunc) Factory {
	return NoParameters(typ, func(n Named) Plugin { return &funcFilter{n, filter} })
}

// StatelessPicker is the registry factory of a picker type that is pick alone.
func StatelessPicker(typ string, pick PickFunc) Factory {
	return NoParameters(typ, func(n Named) Plugin { return &funcPicker{n, pick} })
}
