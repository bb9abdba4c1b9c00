package health

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func tracker(t *testing.T) *Tracker {
	t.Helper()
	s, err := Settings{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return NewTracker(s)
}

func TestFirstCheckAdmitsAtFullWeight(t *testing.T) {
	tr := tracker(t)
	tr.ProbeFailed("dial tcp: connection refused", at(0))
	if st := tr.Status(at(0)); st.InRotation || !strings.Contains(st.Reason, "no successful summary fetch yet (last: dial tcp") {
		t.Fatalf("unchecked member: %+v", st)
	}
	tr.ProbeFailed("refused", at(0.5))
	tr.ProbeSucceeded(at(1))
	if st := tr.Status(at(1)); !st.InRotation || st.Weight != 1 {
		t.Fatalf("after the first good check: %+v", st)
	}
}

// TestDeadMemberOutWithin2sByChecksAlone: polled every 0.5 s with a 0.5 s
// timeout, a member that dies just after a good fetch is out when the second
// fetch after its death times out, 1.5 s later, with no traffic at all.
func TestDeadMemberOutWithin2sByChecksAlone(t *testing.T) {
	tr := tracker(t)
	for k := 0; k <= 20; k++ {
		tr.ProbeSucceeded(at(float64(k) * 0.5))
	}
	death := 10.01
	out := -1.0
	for start := 10.5; start < 15; start += 0.5 {
		done := start + 0.5 // the fetch times out
		tr.ProbeFailed("context deadline exceeded", at(done))
		if !tr.Status(at(done)).InRotation {
			out = done
			break
		}
	}
	if out < 0 || out-death >= 2 {
		t.Fatalf("out of rotation %.2f s after death, want under 2", out-death)
	}
	if st := tr.Status(at(out)); !strings.Contains(st.Reason, "2 consecutive failed summary fetches (last: context deadline exceeded)") {
		t.Fatalf("reason %q", st.Reason)
	}
	// Back: two good checks, then slow start from the minimum weight.
	tr.ProbeSucceeded(at(20))
	if tr.Status(at(20)).InRotation {
		t.Fatal("one good check brought it back")
	}
	tr.ProbeSucceeded(at(20.5))
	for _, c := range []struct{ at, weight float64 }{{20.5, 0.1}, {21.5, 0.1}, {25.5, 0.5}, {28, 0.75}, {30.5, 1}, {40, 1}} {
		st := tr.Status(at(c.at))
		if !st.InRotation || abs(st.Weight-c.weight) > 1e-9 {
			t.Errorf("at %.1f s: %+v, want weight %.2f", c.at, st, c.weight)
		}
	}
}

// TestPassiveEjectionBackOffAndReturn: three resets eject at once; the member
// stays out for EjectFor even while its checks pass, comes back only with a
// check after that, and an ejection soon after its return lasts twice as long.
func TestPassiveEjectionBackOffAndReturn(t *testing.T) {
	tr := tracker(t)
	tr.ProbeSucceeded(at(0))
	tr.ObserveRequest(Success, at(1))
	tr.ObserveRequest(Reset, at(1.001))
	tr.ObserveRequest(Timeout, at(1.002))
	if !tr.Status(at(1.002)).InRotation {
		t.Fatal("out after two failures")
	}
	tr.ObserveRequest(Reset, at(1.003))
	st := tr.Status(at(1.003))
	if st.InRotation || !strings.Contains(st.Reason, "3 consecutive request failures (last: connection reset or refused)") || !strings.Contains(st.Reason, "for 2s") {
		t.Fatalf("after three failures: %+v", st)
	}
	tr.ProbeSucceeded(at(2))
	if tr.Status(at(2.9)).InRotation {
		t.Fatal("back before the ejection time passed")
	}
	if !tr.Status(at(3.1)).InRotation {
		t.Fatal("not back after the ejection time and a good check")
	}
	// Ejected again 5 s after its return: 4 s this time.
	for i := range 3 {
		tr.ObserveRequest(Status5xx, at(8+float64(i)*0.001))
	}
	tr.ProbeSucceeded(at(9))
	if tr.Status(at(11.9)).InRotation {
		t.Fatal("second ejection shorter than 4 s")
	}
	tr.ProbeFailed("timeout", at(12.1))
	if tr.Status(at(12.2)).InRotation {
		t.Fatal("back while its last check failed")
	}
	tr.ProbeSucceeded(at(12.5))
	if st := tr.Status(at(12.5)); !st.InRotation || st.Weight != 0.1 {
		t.Fatalf("after the second ejection: %+v", st)
	}
}

// observeCycle has tr observe n requests, the i-th at 1 + i*step seconds
// with outcome cycle[i % len(cycle)].
func observeCycle(tr *Tracker, n int, step float64, cycle ...Outcome) {
	for i := range n {
		tr.ObserveRequest(cycle[i%len(cycle)], at(1+float64(i)*step))
	}
}

// TestFailureRateEjects: failures spread among successes (never three in a
// row) eject once they are half of ten requests in the window.
func TestFailureRateEjects(t *testing.T) {
	tr := tracker(t)
	tr.ProbeSucceeded(at(0))
	observeCycle(tr, 9, 0.1, Success, Status5xx)
	if st := tr.Status(at(2)); !st.InRotation || st.Requests != 9 {
		t.Fatalf("4 of 9 failed: %+v", st)
	}
	tr.ObserveRequest(Timeout, at(2))
	if st := tr.Status(at(2)); st.InRotation || !strings.Contains(st.Reason, "50% of 10 requests failed") {
		t.Fatalf("5 of 10 failed: %+v", st)
	}
}

func TestSettingsValidation(t *testing.T) {
	for _, bad := range []Settings{{FailureRate: 1.5}, {EjectFor: time.Minute}, {MinWeight: 2}, {ProbeFailures: -1}} {
		if _, err := bad.WithDefaults(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestShedIsNoFailure: a member that turns requests away with 429 is
// saturated, not broken: any number of sheds, even between failures, ejects
// nothing and leaves its error rate at the share that really failed.
func TestShedIsNoFailure(t *testing.T) {
	tr := tracker(t)
	tr.ProbeSucceeded(at(0))
	observeCycle(tr, 40, 0.01, Status5xx, Shed, Shed, Shed, Shed, Shed, Shed, Shed, Shed, Shed)
	st := tr.Status(at(2))
	if !st.InRotation || st.Requests != 40 || st.ErrorRate != 0.1 {
		t.Fatalf("after 36 sheds and 4 failures: %+v, want in rotation with a 10%% error rate over 40 requests", st)
	}
	// Sheds end a run of failures the way a success does.
	tr.ObserveRequest(Reset, at(2.1))
	tr.ObserveRequest(Reset, at(2.2))
	tr.ObserveRequest(Shed, at(2.3))
	tr.ObserveRequest(Reset, at(2.4))
	if st := tr.Status(at(2.5)); !st.InRotation {
		t.Fatalf("two failures, a shed, a failure: %+v, want in rotation", st)
	}
}
