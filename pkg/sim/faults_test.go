package sim

import (
	"errors"
	"testing"
	"time"
)

// oneRequest runs a single request on a fresh H100 engine with faults and
// returns its first token and finish (0: none) and the failure event's time.
func oneRequest(t *testing.T, faults Faults, at time.Duration) (first, finish, failed time.Duration) {
	t.Helper()
	e, err := New(Config{GPU: "H100", Model: "llama-3.1-8b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(Request{ID: 1, Prompt: prompt(1, 2000), OutputTokens: 50}, at); err != nil {
		t.Fatal(err)
	}
	for range 10000 {
		next, busy := e.NextEventTime()
		if !busy {
			break
		}
		for _, ev := range e.Advance(next) {
			switch ev.Kind {
			case EventFirstToken:
				first = ev.Time
			case EventFinish:
				finish = ev.Time
			case EventFailed:
				failed = ev.Time
			}
		}
	}
	return first, finish, failed
}

func TestHangAndSlowStretchTheClock(t *testing.T) {
	first, finish, _ := oneRequest(t, nil, 0)
	if first <= 0 || finish <= first {
		t.Fatalf("healthy run: first %v finish %v", first, finish)
	}
	// A hang from the start delays everything by exactly its length.
	hFirst, hFinish, _ := oneRequest(t, Faults{{Kind: FaultHang, At: 0, For: 30 * time.Second}}, 0)
	if hFirst != first+30*time.Second || hFinish != finish+30*time.Second {
		t.Errorf("hang 30s: first %v finish %v, healthy %v %v", hFirst, hFinish, first, finish)
	}
	// A slow-down over the whole run multiplies every time by its factor.
	sFirst, sFinish, _ := oneRequest(t, Faults{{Kind: FaultSlow, Factor: 3}}, 0)
	if d := sFinish - 3*finish; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("slow x3: finish %v, healthy %v", sFinish, finish)
	}
	if sFirst < 3*first-time.Millisecond {
		t.Errorf("slow x3: first %v, healthy %v", sFirst, first)
	}
	// A hang that starts mid-request holds the stream, then it resumes.
	mid := finish / 2
	_, mFinish, _ := oneRequest(t, Faults{{Kind: FaultHang, At: mid, For: 10 * time.Second}}, 0)
	if mFinish < finish+10*time.Second-50*time.Millisecond || mFinish > finish+10*time.Second+50*time.Millisecond {
		t.Errorf("hang mid-stream: finish %v, healthy %v + 10s", mFinish, finish)
	}
}

func TestFailFastLooksIdle(t *testing.T) {
	e, _ := New(Config{GPU: "H100", Model: "llama-3.1-8b"})
	if err := e.SetFaults(Faults{{Kind: FaultFailFast, At: time.Second, For: time.Second}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(Request{ID: 1, Prompt: prompt(1, 20000), OutputTokens: 500}, 0); err != nil {
		t.Fatal(err)
	}
	if s := e.Snapshot(); s.Running+s.Waiting == 0 {
		t.Fatal("the request before the fault is not in flight")
	}
	if err := e.Submit(Request{ID: 2, Prompt: prompt(2, 100), OutputTokens: 5}, time.Second+time.Millisecond); !errors.Is(err, ErrFailFast) {
		t.Fatalf("submit during fail-fast: %v", err)
	}
	if s := e.Snapshot(); s.Running != 0 || s.Waiting != 0 || s.KVCacheUsage != 0 {
		t.Errorf("metrics during fail-fast: running %d waiting %d kv %v", s.Running, s.Waiting, s.KVCacheUsage)
	}
	if err := e.Submit(Request{ID: 3, Prompt: prompt(3, 100), OutputTokens: 5}, 2*time.Second); err != nil {
		t.Errorf("submit after the fault: %v", err)
	}
}

func TestCrashResetsAndRestartsCold(t *testing.T) {
	e, _ := New(Config{GPU: "H100", Model: "llama-3.1-8b"})
	if err := e.SetFaults(Faults{{Kind: FaultCrash, At: 100 * time.Millisecond, For: 5 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	p := prompt(7, 4000)
	if err := e.Submit(Request{ID: 1, Prompt: p, OutputTokens: 1000}, 0); err != nil {
		t.Fatal(err)
	}
	next, busy := e.NextEventTime()
	for busy && next < 100*time.Millisecond {
		e.Advance(next)
		next, busy = e.NextEventTime()
	}
	if !busy || next != 100*time.Millisecond {
		t.Fatalf("next event %v busy %v, want the crash at 100ms", next, busy)
	}
	evs := e.Advance(next)
	if n := len(evs); n == 0 || evs[n-1].Kind != EventFailed || evs[n-1].RequestID != 1 {
		t.Fatalf("events at the crash: %+v", evs)
	}
	if _, busy := e.NextEventTime(); busy {
		t.Error("the crashed pod is still busy")
	}
	if err := e.Submit(Request{ID: 2, Prompt: p, OutputTokens: 5}, time.Second); !errors.Is(err, ErrRefused) {
		t.Fatalf("submit while down: %v", err)
	}
	if e.MetricsFault(time.Second) != FaultMetricsAbsent {
		t.Error("a crashed pod serves metrics")
	}
	if err := e.Submit(Request{ID: 3, Prompt: p, OutputTokens: 5}, 6*time.Second); err != nil {
		t.Fatalf("submit after the restart: %v", err)
	}
	drain(e, nil)
	if s := e.Snapshot(); s.PrefixCacheHits != 0 {
		t.Errorf("the restarted pod hit %d cached tokens: its cache should start empty", s.PrefixCacheHits)
	}
}

func TestParseFaults(t *testing.T) {
	fs, err := ParseFaults("hang@30s+30s, slow@2m+1mx2.5,crash@0s+0s")
	if err != nil {
		t.Fatal(err)
	}
	want := Faults{{Kind: FaultHang, At: 30 * time.Second, For: 30 * time.Second},
		{Kind: FaultSlow, At: 2 * time.Minute, For: time.Minute, Factor: 2.5}, {Kind: FaultCrash}}
	if len(fs) != len(want) {
		t.Fatalf("got %+v", fs)
	}
	for i := range want {
		if fs[i] != want[i] {
			t.Errorf("fault %d: %+v, want %+v", i, fs[i], want[i])
		}
	}
	again, err := ParseFaults(fs.String())
	if err != nil || len(again) != 3 || again[1] != want[1] {
		t.Errorf("round trip of %q: %+v %v", fs.String(), again, err)
	}
	for _, bad := range []string{"hang", "hang@30s", "hang@x+1s", "boom@1s+1s", "slow@1s+1s", "hang@1s+1sx2", "slow@1s+1sxq"} {
		if _, err := ParseFaults(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{"hang@30s+30s", "slow@2m+1mx2.5,crash@0s+0s", "fail-fast@1s+0s", ",", "x@@+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := ParseFaults(s)
		if err != nil {
			return
		}
		if err := fs.Validate(); err != nil {
			t.Fatalf("%q parsed into an invalid schedule: %v", s, err)
		}
		again, err := ParseFaults(fs.String())
		if err != nil || len(again) != len(fs) {
			t.Fatalf("%q: round trip of %q: %v", s, fs.String(), err)
		}
		for i := range fs {
			if again[i] != fs[i] {
				t.Fatalf("%q: round trip changed %+v into %+v", s, fs[i], again[i])
			}
		}
	})
}
