package scenario

import (
	"fmt"
	"time"
)

// TraceWindow returns a copy of s that replays its trace from offset later:
// the same fleet, SLO, warmup and window length, the requests of
// [start+offset, start+offset+duration) of the same file. Capacity on one
// window of a trace turns on its few slowest requests, so a policy is judged
// on several (capacity.RunWindows). The copy is named after its start.
func (s *Scenario) TraceWindow(offset time.Duration) (*Scenario, error) {
	if s.Workload.Trace == nil {
		return nil, fmt.Errorf("%s: windows need a trace scenario (workload.trace)", s.Name)
	}
	if s.Workload.Trace.Duration <= 0 {
		return nil, fmt.Errorf("%s: windows need workload.trace.duration, the length of each window", s.Name)
	}
	if offset < 0 {
		return nil, fmt.Errorf("%s: a window's offset must not be negative, got %v", s.Name, offset)
	}
	c := *s
	t := *s.Workload.Trace
	t.Start += offset
	t.Records = nil
	c.Workload.Trace = &t
	c.Name = fmt.Sprintf("%s-from-%v", s.Name, t.Start)
	if err := c.loadTrace(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	return &c, nil
}
