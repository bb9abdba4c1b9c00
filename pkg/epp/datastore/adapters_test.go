package datastore

import "testing"

func TestAdapterPlace(t *testing.T) {
	// One endpoint in each place for "sql": resident, a free slot, every
	// slot taken but sql queued, every slot taken.
	vs := []*View{
		{Metrics: Metrics{RunningAdapters: []string{"sql"}, MaxAdapters: 2}},
		{Metrics: Metrics{RunningAdapters: []string{"chat"}, MaxAdapters: 2}},
		{Metrics: Metrics{RunningAdapters: []string{"chat"}, WaitingAdapters: []string{"sql"}, MaxAdapters: 1}},
		{Metrics: Metrics{RunningAdapters: []string{"a", "b"}, MaxAdapters: 2}},
	}
	for i, want := range []AdapterPlace{AdapterResident, AdapterFreeSlot, AdapterQueued, AdapterFull} {
		if got := vs[i].AdapterPlace("sql"); got != want {
			t.Errorf("endpoint %d: place %d, want %d", i, got, want)
		}
		if !vs[i].ServesAdapters() {
			t.Errorf("endpoint %d serves adapters: not said", i)
		}
	}
	vs[3].AdaptersSinceSample = []string{"sql"} // sent there since the sample: loading
	if got := vs[3].AdapterPlace("sql"); got != AdapterResident {
		t.Errorf("adapter sent since the sample: place %d, want resident", got)
	}
	// An adapter sent again while it runs takes no second slot.
	again := &View{Metrics: Metrics{RunningAdapters: []string{"chat"}, MaxAdapters: 2}, AdaptersSinceSample: []string{"chat"}}
	if got := again.AdapterPlace("sql"); got != AdapterFreeSlot {
		t.Errorf("one adapter counted in two slots: place %d", got)
	}
	// Without LoRA telemetry the slot count is unknown: counted as free.
	base := &View{}
	if got := base.AdapterPlace("sql"); got != AdapterFreeSlot {
		t.Errorf("unknown slots: place %d, want a free slot", got)
	}
	if base.ServesAdapters() {
		t.Error("an endpoint without adapters said to serve them")
	}
}
