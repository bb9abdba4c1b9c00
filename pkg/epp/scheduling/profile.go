package scheduling

import (
	"strconv"
	"strings"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// Profile is one configured pipeline: filters, weighted scorers, a picker and
// how many fallbacks to return after the destination.
type Profile struct {
	Filters   []Filter
	Scorers   []WeightedScorer
	Picker    Picker
	Fallbacks int
}

// ReadCache runs the profile's cache readers (CacheReader) over cands, once
// per cycle: the director calls it before admission judges the candidates,
// Run for callers that did not.
func (p *Profile) ReadCache(c *Cycle, cands []*datastore.View) {
	if c.cacheRead {
		return
	}
	c.cacheRead = true
	for _, ws := range p.Scorers {
		if r, ok := ws.Scorer.(CacheReader); ok {
			r.ReadCache(c, cands)
		}
	}
}

// Run filters cands, scores and ranks the survivors. It returns the survivors
// and the ranking (indices into them, destination first); both are owned by c.
func (p *Profile) Run(c *Cycle, cands []*datastore.View) (survivors []*datastore.View, ranking []int) {
	p.ReadCache(c, cands)
	cands = p.Filter(c, cands)
	c.cands = cands
	if len(cands) == 0 {
		return cands, nil
	}
	for len(c.raw) < len(p.Scorers) {
		c.raw = append(c.raw, nil)
	}
	c.totals = grow(c.totals, len(cands))
	clear(c.totals)
	for i, ws := range p.Scorers {
		raw := grow(c.raw[i], len(cands))
		clear(raw)
		c.raw[i] = raw
		ws.Scorer.Score(c, cands, raw)
		for j, s := range raw {
			c.totals[j] += ws.Weight * clamp01(s)
		}
	}
	c.ranking = p.Picker.Pick(c, cands, c.totals, 1+p.Fallbacks, c.ranking[:0])
	return cands, c.ranking
}

// Filter applies the profile's filters to cands (in place) and returns the
// endpoints that pass them all.
func (p *Profile) Filter(c *Cycle, cands []*datastore.View) []*datastore.View {
	for _, f := range p.Filters {
		if len(cands) == 0 {
			break
		}
		cands = f.Filter(c, cands)
	}
	return cands
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func clamp01(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x >= 0:
		return x
	}
	return 0 // negative and NaN
}

// ScoreTerm is one scorer's contribution to an endpoint's total.
type ScoreTerm struct {
	Scorer string
	Raw    float64
	Weight float64
}

// Breakdown explains one decision: the destination's total and each scorer's
// raw score and weight.
type Breakdown struct {
	Endpoint   string
	Total      float64
	Terms      []ScoreTerm
	Candidates int
	Reason     string
}

// Breakdown returns the explanation of candidate i of the last Run.
func (c *Cycle) Breakdown(p *Profile, i int) Breakdown {
	b := Breakdown{Candidates: len(c.cands)}
	if i < 0 || i >= len(c.cands) {
		return b
	}
	b.Endpoint = c.cands[i].Key
	b.Total = c.totals[i]
	b.Terms = make([]ScoreTerm, len(p.Scorers))
	for k, ws := range p.Scorers {
		b.Terms[k] = ScoreTerm{Scorer: ws.Scorer.Name(), Raw: clamp01(c.raw[k][i]), Weight: ws.Weight}
	}
	return b
}

// String renders the breakdown as the x-igw-score-breakdown header value:
//
//	endpoint=10.0.0.7:8000;reason=scored;total=2.6000;candidates=4;queue=1.0000*2;prefix-cache=0.2000*3
//
// Each scorer term is its raw score (0..1) times its weight; total is their sum.
func (b Breakdown) String() string {
	var sb strings.Builder
	sb.WriteString("endpoint=")
	sb.WriteString(b.Endpoint)
	sb.WriteString(";reason=")
	sb.WriteString(b.Reason)
	sb.WriteString(";total=")
	sb.WriteString(strconv.FormatFloat(b.Total, 'f', 4, 64))
	sb.WriteString(";candidates=")
	sb.WriteString(strconv.Itoa(b.Candidates))
	for _, t := range b.Terms {
		sb.WriteByte(';')
		sb.WriteString(t.Scorer)
		sb.WriteByte('=')
		sb.WriteString(strconv.FormatFloat(t.Raw, 'f', 4, 64))
		sb.WriteByte('*')
		sb.WriteString(strconv.FormatFloat(t.Weight, 'g', -1, 64))
	}
	return sb.String()
}

// Plugins lists every plugin of the profile: filters, scorers, picker.
func (p *Profile) Plugins() []Plugin {
	plugins := make([]Plugin, 0, len(p.Filters)+len(p.Scorers)+1)
	for _, f := range p.Filters {
		plugins = append(plugins, f)
	}
	for _, s := range p.Scorers {
		plugins = append(plugins, s.Scorer)
	}
	if p.Picker != nil {
		plugins = append(plugins, p.Picker)
	}
	return plugins
}
