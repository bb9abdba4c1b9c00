package global

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/openaimodels"
)

// Member is one member cluster as the hub's configuration names it.
type Member struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	// Address is "host:port" of the member's inference gateway: what the
	// destination header names.
	Address string `json:"address"`
}

// Labels of a member's datastore endpoint.
const (
	LabelMember = "member"
	LabelRegion = "region"
)

type memberState struct {
	Member
	endpoint datastore.Endpoint
	health   *health.Tracker

	mu        sync.Mutex
	summary   *globalsummary.Summary // never modified once stored: snapshots share it
	summaryAt time.Time
	// sent is the uncached prompt tokens sent per model since the summary.
	sent     map[string]float64
	rtt      time.Duration
	rttKnown bool
	// lastError is why the last fetch failed ("" after a good one); garbage
	// tells a member that answered with an invalid document.
	lastError string
	garbage   bool
}

func (m *memberState) snapshot(model string, now time.Time) member.State {
	m.mu.Lock()
	s := member.State{Name: m.Name, Region: m.Region, Address: m.Address, SummaryAt: m.summaryAt,
		SentTokens: m.sent[model], RTT: m.rtt, RTTKnown: m.rttKnown}
	if m.summary != nil {
		s.Summary = m.summary.Find(model)
	}
	m.mu.Unlock()
	s.Health = m.health.Status(now)
	return s
}

func (m *memberState) addSent(model string, tokens int) {
	m.mu.Lock()
	m.sent[model] += float64(tokens)
	m.mu.Unlock()
}

func validateMembers(ms []Member) ([]datastore.Endpoint, error) {
	names, addrs := map[string]bool{}, map[string]string{}
	eps := make([]datastore.Endpoint, 0, len(ms))
	for i, m := range ms {
		switch {
		case m.Name == "":
			return nil, fmt.Errorf("members[%d]: name is required", i)
		case names[m.Name]:
			return nil, fmt.Errorf("members[%d]: name %s is used twice", i, m.Name)
		case m.Region == "":
			return nil, fmt.Errorf("members[%d] (%s): region is required", i, m.Name)
		}
		host, portText, err := net.SplitHostPort(m.Address)
		port, perr := strconv.Atoi(portText)
		if err != nil || host == "" || perr != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("members[%d] (%s): address %q is not host:port (for example gw.use1.example:443)", i, m.Name, m.Address)
		}
		ep := datastore.Endpoint{Address: host, Port: port, Labels: map[string]string{LabelMember: m.Name, LabelRegion: m.Region}}
		if other, dup := addrs[ep.Key()]; dup {
			return nil, fmt.Errorf("members[%d] (%s): address %s is also member %s's", i, m.Name, m.Address, other)
		}
		names[m.Name], addrs[ep.Key()] = true, m.Name
		eps = append(eps, ep)
	}
	return eps, nil
}

// SetMembers makes ms the member clusters. A member that stays (same name and
// address) keeps its summary, health and round trip; a new one is out of
// rotation until its first good summary.
func (p *Picker) SetMembers(ms []Member) error {
	eps, err := validateMembers(ms)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	byName := make(map[string]*memberState, len(ms))
	byKey := make(map[string]*memberState, len(ms))
	for i, m := range ms {
		st := p.members[m.Name]
		if st == nil || st.Address != m.Address {
			st = &memberState{Member: m, endpoint: eps[i], health: health.NewTracker(p.opts.Health), sent: map[string]float64{}}
		} else if st.Region != m.Region {
			// Views share an endpoint's labels; a new region is a new member state.
			st = &memberState{Member: m, endpoint: eps[i], health: st.health, sent: map[string]float64{},
				summary: st.summary, summaryAt: st.summaryAt, rtt: st.rtt, rttKnown: st.rttKnown}
		}
		byName[m.Name], byKey[eps[i].Key()] = st, st
	}
	p.members, p.byKey, p.endpoints = byName, byKey, eps
	for _, ms := range p.models {
		ms.store.SetEndpoints(eps)
	}
	return nil
}

// Members returns the member clusters, as last set.
func (p *Picker) Members() []Member {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Member, 0, len(p.members))
	for _, ep := range p.endpoints {
		out = append(out, p.byKey[ep.Key()].Member)
	}
	return out
}

func (p *Picker) member(name string) (*memberState, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	m := p.members[name]
	if m == nil {
		return nil, fmt.Errorf("no member cluster named %q", name)
	}
	return m, nil
}

// UpdateSummary stores a summary fetched from member name, received at now
// after a round trip of rtt (0: not measured): a good active check. An invalid
// document counts as a failed check (SummaryFailed), as garbage.
func (p *Picker) UpdateSummary(name string, s *globalsummary.Summary, rtt time.Duration, now time.Time) error {
	m, err := p.member(name)
	if err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		err = &globalsummary.FetchError{URL: name, Garbage: true, Err: fmt.Errorf("global summary: %w", err)}
		p.summaryFailed(m, err, now)
		return err
	}
	m.mu.Lock()
	m.summary, m.summaryAt, m.lastError, m.garbage = s, now, "", false
	clear(m.sent)
	if rtt > 0 {
		m.observeRTTLocked(rtt, p.opts.RTTSmoothing)
	}
	m.mu.Unlock()
	m.health.ProbeSucceeded(now)
	for i := range s.Models {
		ms := p.modelStore(s.Models[i].Model)
		ms.store.UpdateMetrics(m.endpoint.Key(), member.MetricsOf(&s.Models[i], now), now)
	}
	return nil
}

// SummaryFailed records a failed fetch from member name at now (no answer in
// time, an error status, or garbage: a globalsummary.FetchError says which).
func (p *Picker) SummaryFailed(name string, fetchErr error, now time.Time) error {
	m, err := p.member(name)
	if err != nil {
		return err
	}
	p.summaryFailed(m, fetchErr, now)
	return nil
}

func (p *Picker) summaryFailed(m *memberState, err error, now time.Time) {
	var fe *globalsummary.FetchError
	m.mu.Lock()
	m.lastError, m.garbage = err.Error(), errors.As(err, &fe) && fe.Garbage
	m.mu.Unlock()
	m.health.ProbeFailed(err.Error(), now)
}

// ObserveRTT records a measured round trip to member name.
func (p *Picker) ObserveRTT(name string, rtt time.Duration) error {
	m, err := p.member(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.observeRTTLocked(rtt, p.opts.RTTSmoothing)
	m.mu.Unlock()
	return nil
}

func (m *memberState) observeRTTLocked(rtt time.Duration, alpha float64) {
	if !m.rttKnown {
		m.rtt, m.rttKnown = rtt, true
		return
	}
	m.rtt += time.Duration(alpha * float64(rtt-m.rtt))
}

// MemberStatus is what the hub's status reports of a member.
type MemberStatus struct {
	Member
	InRotation bool
	Weight     float64
	// Reason says why it is out of rotation or warming up.
	Reason string
	// SummaryAge is the age of the latest good summary (-1: none yet).
	SummaryAge time.Duration
	RTT        time.Duration
	RTTKnown   bool
	// Models are those its latest summary lists.
	Models []string
	// LastError is why the latest fetch failed ("" when it succeeded);
	// Garbage: the member answered with an invalid document.
	LastError string
	Garbage   bool
}

// Status reports every member at now, in address order.
func (p *Picker) Status(now time.Time) []MemberStatus {
	p.mu.RLock()
	list := make([]*memberState, 0, len(p.endpoints))
	for _, ep := range p.endpoints {
		list = append(list, p.byKey[ep.Key()])
	}
	p.mu.RUnlock()
	out := make([]MemberStatus, 0, len(list))
	for _, m := range list {
		h := m.health.Status(now)
		st := MemberStatus{Member: m.Member, InRotation: h.InRotation, Weight: h.Weight, Reason: h.Reason, SummaryAge: -1}
		m.mu.Lock()
		if m.summary != nil {
			st.SummaryAge = now.Sub(m.summaryAt)
			for _, e := range m.summary.Models {
				st.Models = append(st.Models, e.Model)
			}
			slices.Sort(st.Models)
		}
		st.RTT, st.RTTKnown, st.LastError, st.Garbage = m.rtt, m.rttKnown, m.lastError, m.garbage
		m.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// ServedModels lists what the hub can route: every model and LoRA adapter
// (with its base model as parent) in the members' latest good summaries,
// models sorted by name, each followed by its adapters. A member out of
// rotation keeps its models listed: its summary still says what it serves.
func (p *Picker) ServedModels() []openaimodels.Entry {
	adapters := map[string]map[string]bool{} // base model -> adapter names
	p.mu.RLock()
	for _, m := range p.members {
		m.mu.Lock()
		if s := m.summary; s != nil {
			for _, e := range s.Models {
				if adapters[e.Model] == nil {
					adapters[e.Model] = map[string]bool{}
				}
				for _, a := range e.Adapters {
					adapters[e.Model][a] = true
				}
			}
		}
		m.mu.Unlock()
	}
	p.mu.RUnlock()
	models := slices.Sorted(maps.Keys(adapters))
	// A name is listed once: an adapter named like a model, or listed under
	// two models, keeps the first place it has.
	listed := make(map[string]bool, len(models))
	for _, model := range models {
		listed[model] = true
	}
	out := make([]openaimodels.Entry, 0, len(models))
	for _, model := range models {
		out = append(out, openaimodels.Entry{ID: model})
		for _, a := range slices.Sorted(maps.Keys(adapters[model])) {
			if !listed[a] {
				listed[a] = true
				out = append(out, openaimodels.Entry{ID: a, Parent: model})
			}
		}
	}
	return out
}
