package des

import (
	"time"

	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/sim"
)

// kvEventHashSeed is the engines' PYTHONHASHSEED: one for the fleet, as a
// deployment sets it, though the router's index does not depend on it.
const kvEventHashSeed = "igw-bench"

// eventRelay hands one engine's KV events to the router as the picker's
// subscriber decodes them (vLLM's 64-bit block hashes), at engine time; the
// router's feed applies them after the scenario's event delay. Lost batches
// (events-lost faults) are reported as such: a sequence gap to the picker.
type eventRelay struct {
	pod    int
	router policies.KVEventReceiver
	events []kvevents.Event
	hashes []uint64
}

var _ sim.KVEventLossSink = (*eventRelay)(nil)

// PublishKVEvents implements sim.KVEventSink; the router copies what it keeps.
func (e *eventRelay) PublishKVEvents(at time.Duration, events []sim.KVEvent) {
	e.events, e.hashes = e.events[:0], e.hashes[:0]
	for i := range events {
		ev := &events[i]
		start := len(e.hashes)
		for _, h := range ev.BlockHashes {
			e.hashes = append(e.hashes, h.Int())
		}
		out := kvevents.Event{Kind: ev.Kind, Tokens: ev.TokenIDs, BlockSize: sim.BlockSize,
			LoRAName: ev.LoRAName, LoRAID: int64(ev.LoRAID), HasParent: ev.HasParent}
		if ev.HasParent {
			out.Parent = ev.Parent.Int()
		}
		e.events = append(e.events, out)
		e.events[len(e.events)-1].Hashes = e.hashes[start:len(e.hashes):len(e.hashes)]
	}
	// Hashes were appended while being sliced: re-slice from the final array.
	h := 0
	for i := range e.events {
		n := len(e.events[i].Hashes)
		e.events[i].Hashes = e.hashes[h : h+n : h+n]
		h += n
	}
	e.router.PublishKVEvents(e.pod, epoch.Add(at), e.events)
}

// LostKVEvents implements sim.KVEventLossSink.
func (e *eventRelay) LostKVEvents(at time.Duration) { e.router.LostKVEvents(e.pod, epoch.Add(at)) }

// relayKVEvents makes every engine publish its KV events to a router that
// reads them.
func (r *run) relayKVEvents() error {
	recv, ok := r.router.(policies.KVEventReceiver)
	if !ok || !r.wants.KVEvents {
		return nil
	}
	for i, e := range r.pods {
		if err := e.EnableKVEvents(&eventRelay{pod: i, router: recv}, kvEventHashSeed); err != nil {
			return err
		}
		recv.PublishKVEvents(i, epoch, nil) // the stream starts with the empty cache: exact from the start
	}
	return nil
}
