package scenario

import "time"

// ScaleRate returns a copy of s whose arrivals come m times as fast: for a
// seed, the same requests at their arrival times divided by m. Durations of
// the arrival process (the scenario's duration and warmup, stages, on/off
// bursts) shrink by m and rates grow by m, so the arrival process draws the
// same gaps on its operational clock; a trace's rateScale is multiplied by m.
// Think times between turns are the users' and stay as they are. An outage
// starts at the same point of the shrunk run and lasts as long (a member's
// downtime and the hub's detection are wall-clock matters).
func (s *Scenario) ScaleRate(m float64) *Scenario {
	c := *s
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / m) }
	c.Duration, c.Warmup = scale(s.Duration), scale(s.Warmup)
	c.Outages = make([]Outage, len(s.Outages))
	for i, o := range s.Outages {
		c.Outages[i] = Outage{Cluster: o.Cluster, At: scale(o.At), For: o.For}
	}
	w := &c.Workload
	if s.Workload.Trace != nil {
		t := *s.Workload.Trace
		t.RateScale *= m
		w.Trace = &t
		return &c
	}
	w.Arrival.Rate *= m
	w.Arrival.On, w.Arrival.Off = scale(w.Arrival.On), scale(w.Arrival.Off)
	w.Stages = make([]Stage, len(s.Workload.Stages))
	for i, st := range s.Workload.Stages {
		w.Stages[i] = Stage{Rate: st.Rate * m, Duration: scale(st.Duration)}
	}
	return &c
}
