package datastore

import (
	"slices"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/latency"
)

// Store is the set of endpoints and their state. Endpoint sources replace the
// set; state survives for endpoints that stay.
type Store struct {
	mu       sync.RWMutex
	byKey    map[string]*EndpointState
	list     []*EndpointState // sorted by key: deterministic iteration
	freeIDs  []int32
	nextID   int32
	priors   latency.Priors
	onRemove []func(id int32)
	// classes are the speed classes by accelerator (class.go).
	classes map[string]*speedClass
}

// NewStore returns an empty store whose new endpoints start from priors.
func NewStore(priors latency.Priors) *Store {
	return &Store{byKey: make(map[string]*EndpointState), priors: priors}
}

// OnRemove registers f to run (under no store lock) with the id of each removed
// endpoint, before the id can be reused.
func (s *Store) OnRemove(f func(id int32)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRemove = append(s.onRemove, f)
}

// SetEndpoints makes eps the endpoint set (duplicates by key collapse to the
// last). It returns the keys added and removed.
func (s *Store) SetEndpoints(eps []Endpoint) (added, removed []string) {
	want := make(map[string]Endpoint, len(eps))
	for _, ep := range eps {
		want[ep.Key()] = ep
	}
	s.mu.Lock()
	var removedIDs []int32
	// Both in a stable order (the sorted list, then eps's), so that a run
	// that sets the same endpoints gives them the same IDs, on which ties
	// between endpoints are broken.
	for _, st := range s.list {
		if _, ok := want[st.key]; !ok {
			delete(s.byKey, st.key)
			st.class.forget(st.id)
			removed = append(removed, st.key)
			removedIDs = append(removedIDs, st.id)
		}
	}
	for _, e := range eps {
		key := e.Key()
		ep, first := want[key]
		if !first {
			continue // a duplicate key, set at its first place
		}
		delete(want, key)
		if st, ok := s.byKey[key]; ok {
			if !labelsEqual(st.endpoint.Labels, ep.Labels) {
				// Views share the labels map, so it is replaced, never mutated.
				class := s.classOf(ep.Labels)
				st.mu.Lock()
				st.endpoint.Labels = ep.Labels
				if st.class != class {
					st.class.forget(st.id)
					st.class = class
				}
				st.mu.Unlock()
			}
			continue
		}
		st := newEndpointState(s.allocID(), ep, s.priors)
		st.class = s.classOf(ep.Labels)
		s.byKey[key] = st
		added = append(added, key)
	}
	s.list = s.list[:0]
	for _, st := range s.byKey {
		s.list = append(s.list, st)
	}
	slices.SortFunc(s.list, func(a, b *EndpointState) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	hooks := s.onRemove
	s.mu.Unlock()
	for _, id := range removedIDs {
		for _, f := range hooks {
			f(id)
		}
	}
	s.mu.Lock()
	s.freeIDs = append(s.freeIDs, removedIDs...)
	s.mu.Unlock()
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func (s *Store) allocID() int32 {
	if n := len(s.freeIDs); n > 0 {
		id := s.freeIDs[n-1]
		s.freeIDs = s.freeIDs[:n-1]
		return id
	}
	s.nextID++
	return s.nextID - 1
}

// Get returns the endpoint with key ("ip:port"), or nil.
func (s *Store) Get(key string) *EndpointState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byKey[key]
}

// Endpoints appends the current endpoints, sorted by key, to dst.
func (s *Store) Endpoints(dst []*EndpointState) []*EndpointState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append(dst, s.list...)
}

// Len is the number of endpoints.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.list)
}

// MaxID is one more than the largest id in use: the length of a slice indexed by id.
func (s *Store) MaxID() int32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nextID
}

// UpdateMetrics stores a sample for the endpoint with key; it reports whether
// the endpoint exists.
func (s *Store) UpdateMetrics(key string, m Metrics, now time.Time) bool {
	st := s.Get(key)
	if st == nil {
		return false
	}
	st.UpdateMetrics(m, now)
	return true
}

// SetServedModels stores the model list of the endpoint with key; it reports
// whether the endpoint exists.
func (s *Store) SetServedModels(key string, m *ServedModels) bool {
	st := s.Get(key)
	if st == nil {
		return false
	}
	st.SetServedModels(m)
	return true
}
