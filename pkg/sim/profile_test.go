package sim

import (
	"math"
	"testing"
)

// The derived table of the README's profiles: KV capacity, prefill rate
// and decode step at batch 1/32/128 with 1000 tokens of context each.
func TestProfilesReproduceDerivedTable(t *testing.T) {
	for _, row := range []struct {
		gpu, model   string
		tp           int
		kvTokens     float64
		prefillTokS  float64
		decodeMillis [3]float64
	}{
		{"H100", "llama-3.1-8b", 1, 452e3, 27.7e3, [3]float64{8.2, 10.0, 15.6}},
		{"A100", "llama-3.1-8b", 1, 452e3, 7.4e3, [3]float64{12.1, 14.9, 23.5}},
		{"L40S", "llama-3.1-8b", 1, 216e3, 7.2e3, [3]float64{26.5, 32.9, 52.7}},
		{"A10G", "llama-3.1-8b", 1, 39e3, 1.5e3, [3]float64{37.5, 46.6, 75.0}},
		{"L4", "llama-3.1-8b", 1, 39e3, 2.6e3, [3]float64{73.5, 91.6, 148}},
		{"H100", "qwen3-32b", 2, 324e3, 13.6e3, [3]float64{15.2, 17.0, 22.6}},
		{"A100", "qwen3-32b", 2, 324e3, 3.6e3, [3]float64{23.0, 25.8, 34.4}},
		{"H100", "llama-3.1-70b", 4, 488e3, 12.6e3, [3]float64{16.2, 17.3, 21.0}},
	} {
		p := mustProfile(t, row.gpu, row.model, row.tp)
		name := row.gpu + "/" + row.model
		within(t, name+" KV tokens", float64(p.KVCapacityTokens), row.kvTokens, 0.03)
		within(t, name+" prefill tok/s", p.PrefillTokensPerSecond(), row.prefillTokS, 0.02)
		for i, batch := range []int{1, 32, 128} {
			got := p.StepSeconds(0, batch, int64(batch)*1000, 0) * 1e3
			within(t, name+" decode step", got, row.decodeMillis[i], 0.015)
		}
	}
}

// mustProfile is the built-in profile, failing the test when the lookup does
// (a zero profile would turn every ratio below into NaN).
func mustProfile(t testing.TB, gpu, model string, tensorParallel int) Profile {
	t.Helper()
	p, err := NewProfile(gpu, model, tensorParallel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// near reports whether got is at most tolerance away from want; NaN is near
// nothing, so a computation gone wrong cannot pass.
func near(got, want, tolerance float64) bool { return math.Abs(got-want) <= tolerance }

// within checks got against want to a relative tolerance.
func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if !near(got, want, tolerance*math.Abs(want)) {
		t.Errorf("%s = %.4g, want %.4g ±%.1f%%", what, got, want, tolerance*100)
	}
}

func TestDecodeRatioAcrossGPUs(t *testing.T) {
	// The README's anchor: decode step ratio H100 : A100 : L40S : A10G : L4 ≈ 1 : 1.5 : 3.2 : 4.6 : 9.
	h100 := mustProfile(t, "H100", "llama-3.1-8b", 1)
	base := h100.StepSeconds(0, 1, 1000, 0)
	for gpu, ratio := range map[string]float64{"A100": 1.5, "L40S": 3.2, "A10G": 4.6, "L4": 9} {
		p := mustProfile(t, gpu, "llama-3.1-8b", 1)
		within(t, gpu+" decode ratio", p.StepSeconds(0, 1, 1000, 0)/base, ratio, 0.05)
	}
}

func TestH200HasH100ComputeAndMoreBandwidth(t *testing.T) {
	h100 := mustProfile(t, "H100", "llama-3.1-8b", 1)
	h200 := mustProfile(t, "h200", "llama-3.1-8b", 1)
	if h200.PerPrefillToken != h100.PerPrefillToken {
		t.Errorf("H200 prefill %.3g s/token, H100 %.3g", h200.PerPrefillToken, h100.PerPrefillToken)
	}
	within(t, "H200/H100 weight-read time", (h200.Base-stepOverhead)/(h100.Base-stepOverhead), 3.35/4.8, 0.001)
	if h200.KVCapacityTokens <= h100.KVCapacityTokens {
		t.Errorf("H200 KV %d tokens not above H100 %d", h200.KVCapacityTokens, h100.KVCapacityTokens)
	}
}

func TestNewProfileErrors(t *testing.T) {
	for _, tc := range []struct {
		gpu, model string
		tp         int
	}{{"V100", "llama-3.1-8b", 1}, {"H100", "gpt-5", 1}, {"H100", "llama-3.1-8b", 0}, {"L4", "llama-3.1-70b", 1}, {"H100", "llama-3.1-70b", 1}} {
		if _, err := NewProfile(tc.gpu, tc.model, tc.tp); err == nil {
			t.Errorf("NewProfile(%s, %s, %d) succeeded", tc.gpu, tc.model, tc.tp)
		}
	}
	if _, err := NewProfile("a100-80", "LLAMA-3.1-8B", 1); err != nil {
		t.Errorf("alias and case-insensitive lookup failed: %v", err)
	}
}

func TestAnalyticTTFTChunks(t *testing.T) {
	p := mustProfile(t, "H100", "llama-3.1-8b", 1)
	one := p.AnalyticTTFT(8192, 0, 8192)
	two := p.AnalyticTTFT(8193, 0, 8192)
	if d := two - one; d < seconds(p.Base) {
		t.Errorf("one token over the chunk budget added %v, want at least a step base %v", d, seconds(p.Base))
	}
	if p.AnalyticTTFT(1000, 992, 8192) >= p.AnalyticTTFT(1000, 0, 8192) {
		t.Error("cached tokens did not lower the analytic TTFT")
	}
}
