package scenario

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/pkg/sim"
)

// Fault is one entry of the scenario's faults: a misbehaviour of one pod (the
// replica-th of a fleet group) from At for For (0: to the end of the run).
// The keys are the benchmark contract's; kinds are sim.FaultKinds.
type Fault struct {
	Group   string        `yaml:"group"`
	Replica int           `yaml:"replica"`
	Kind    string        `yaml:"kind"`
	At      time.Duration `yaml:"at"`
	For     time.Duration `yaml:"for"`
	// Factor is the slow-down of kind slow.
	Factor float64 `yaml:"factor"`
}

func (f Fault) sim() sim.Fault {
	return sim.Fault{Kind: sim.FaultKind(f.Kind), At: f.At, For: f.For, Factor: f.Factor}
}

// PodFaults returns each pod's fault schedule, in PodConfigs order (nil for
// a pod without faults).
func (s *Scenario) PodFaults() []sim.Faults {
	out := make([]sim.Faults, len(s.PodGroups()))
	for _, f := range s.Faults {
		if i := s.podIndex(f.Group, f.Replica); i >= 0 {
			out[i] = append(out[i], f.sim())
		}
	}
	return out
}

// podIndex is the fleet-order index of group's replica-th pod; -1 if there
// is none.
func (s *Scenario) podIndex(group string, replica int) int {
	i := 0
	for _, g := range s.Groups() {
		if g.Name == group {
			if replica < 0 || replica >= g.Replicas {
				return -1
			}
			return i + replica
		}
		i += g.Replicas
	}
	return -1
}

func (s *Scenario) validateFaults() []error {
	var errs []error
	for i, f := range s.Faults {
		at := fmt.Sprintf("faults[%d]", i)
		if s.podIndex(f.Group, 0) < 0 {
			errs = append(errs, fmt.Errorf("%s.group %q names no fleet group", at, f.Group))
		} else if s.podIndex(f.Group, f.Replica) < 0 {
			errs = append(errs, fmt.Errorf("%s.replica %d is not a replica of group %q (0-based, below its replicas)", at, f.Replica, f.Group))
		}
		if err := f.sim().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	return errs
}
