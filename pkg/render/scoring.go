package render

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/epp/admission"
	eppconfig "github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/modelserved"
	"github.com/igw-dev/igw/pkg/wire"
)

// BuiltinWeights are the weights of scorers that neither the config, the route,
// nor auto-tuning set. Predicted latency leads because it already folds queues,
// cached prefixes and each pod's measured speed into seconds; the simple load
// signals stay on as tie-breakers for the time before speeds are learned.
var BuiltinWeights = igwv1.ScoringWeights{
	igwv1.ScorerPredictedLatency:   2,
	igwv1.ScorerPrefixCache:        1,
	igwv1.ScorerQueue:              1,
	igwv1.ScorerKVCacheUtilization: 1,
	igwv1.ScorerRunningRequests:    0,
	igwv1.ScorerLoRAAffinity:       0,
}

// Weights auto-tuning moves to, and the label that carries a pod's accelerator.
const (
	AutoLoRAAffinityWeight = 2
	// AutoPredictedLatencyFactor multiplies predicted-latency's weight when the
	// pool mixes accelerator types: it is the one scorer that learns per-pod speed.
	AutoPredictedLatencyFactor = 2
	LabelGPUProduct            = wire.LabelGPUProduct
)

// Scoring sources reported in status.scoring.source.
const (
	ScoringSourceRendered  = "Rendered"
	ScoringSourceConfigMap = "ConfigMap"
)

// Observations are what the operator saw of a route's pool that scoring depends on.
type Observations struct {
	// AcceleratorTypes are the distinct nvidia.com/gpu.product values of the
	// selected pods (from the pod, else its node), sorted.
	AcceleratorTypes []string
}

// ResolveScoring returns the weights in effect for a route, and why: built-in
// defaults, then auto-tuning from observations (when on), then the config's
// weights, then the route's. Manual weights always win, so an adjustment is
// only reported when no manual weight replaced it.
func ResolveScoring(cfg *igwv1.InferenceGatewayConfig, mr *igwv1.ModelRoute, obs Observations) igwv1.ScoringStatus {
	weights := igwv1.ScoringWeights{}
	for k, v := range BuiltinWeights {
		weights[k] = v
	}
	manual := map[string]bool{}
	var routeWeights igwv1.ScoringWeights
	if mr.Spec.Scoring != nil {
		routeWeights = mr.Spec.Scoring.Weights
	}
	for _, w := range []igwv1.ScoringWeights{cfg.Spec.Scoring.Weights, routeWeights} {
		for k := range w {
			manual[k] = true
		}
	}

	var adjustments []igwv1.ScoringAdjustment
	adjust := func(scorer string, weight int32, reason string) {
		if manual[scorer] || weights[scorer] == weight {
			return
		}
		weights[scorer] = weight
		adjustments = append(adjustments, igwv1.ScoringAdjustment{Scorer: scorer, Weight: weight, Reason: reason})
	}
	if autoTune(cfg, mr) {
		if n := len(mr.Spec.Adapters); n > 0 {
			names := make([]string, n)
			for i, a := range mr.Spec.Adapters {
				names[i] = string(a.Name)
			}
			adjust(igwv1.ScorerLoRAAffinity, AutoLoRAAffinityWeight, fmt.Sprintf(
				"the route declares %d LoRA adapter(s) (%s): prefer pods that have the adapter loaded or a free slot",
				n, strings.Join(names, ", ")))
		}
		if n := len(obs.AcceleratorTypes); n > 1 {
			adjust(igwv1.ScorerPredictedLatency, weights[igwv1.ScorerPredictedLatency]*AutoPredictedLatencyFactor, fmt.Sprintf(
				"the selected pods run on %d accelerator types (%s): predicted-latency learns each pod's speed",
				n, strings.Join(obs.AcceleratorTypes, ", ")))
		}
	}
	for _, w := range []igwv1.ScoringWeights{cfg.Spec.Scoring.Weights, routeWeights} {
		for k, v := range w {
			weights[k] = v
		}
	}
	if !anyPositive(weights) {
		// The EPP needs one scorer; all-zero manual weights cannot mean "no scoring".
		weights[igwv1.ScorerPredictedLatency] = 1
		adjustments = append(adjustments, igwv1.ScoringAdjustment{Scorer: igwv1.ScorerPredictedLatency, Weight: 1,
			Reason: "every weight is 0 and the endpoint picker needs one scorer: predicted-latency keeps weight 1"})
	}
	return igwv1.ScoringStatus{Source: ScoringSourceRendered, Weights: map[string]int32(weights), Adjustments: adjustments}
}

func autoTune(cfg *igwv1.InferenceGatewayConfig, mr *igwv1.ModelRoute) bool {
	if mr.Spec.Scoring != nil && mr.Spec.Scoring.AutoTune != nil {
		return *mr.Spec.Scoring.AutoTune
	}
	return cfg.Spec.Scoring.AutoTune == nil || *cfg.Spec.Scoring.AutoTune
}

func anyPositive(w igwv1.ScoringWeights) bool {
	for _, v := range w {
		if v > 0 {
			return true
		}
	}
	return false
}

// EPPConfig renders the endpoint picker's configuration file for a route from
// the weights in effect. Scorers with weight 0 are left out; the base models
// tell the picker which requested names are not adapters, and the
// model-served filter (as in the picker's built-in default) keeps an adapter's
// requests off pods whose model list lacks it, so that an adapter registered
// on some pods only is not sent where it gets a 404.
func EPPConfig(mr *igwv1.ModelRoute, scoring igwv1.ScoringStatus) ([]byte, error) {
	c := eppconfig.Config{Filters: []string{modelserved.Type}, Picker: "max-score-picker"}
	for _, name := range igwv1.Scorers {
		if w := scoring.Weights[name]; w > 0 {
			c.Scorers = append(c.Scorers, eppconfig.ScorerSpec{Plugin: name, Weight: float64(w)})
		}
	}
	for _, m := range mr.Spec.Models {
		c.BaseModels = append(c.BaseModels, string(m))
	}
	slices.Sort(c.BaseModels)
	if slo, ok := routeSLO(mr); ok {
		c.Admission = &eppconfig.AdmissionSpec{SLO: &slo}
	}
	return yaml.Marshal(c)
}

// routeSLO is the route's spec.slo in the picker's terms; ok is false when
// the route sets none (the picker then assumes admission.DefaultSLO).
func routeSLO(mr *igwv1.ModelRoute) (slo admission.SLO, ok bool) {
	if mr.Spec.SLO == nil {
		return admission.SLO{}, false
	}
	return admission.SLO{TTFTSeconds: mr.Spec.SLO.TTFTSeconds, TPOTSeconds: mr.Spec.SLO.TPOTSeconds}, true
}

// rawEPPConfig is a raw configuration (scoring.configMapRef) with the
// route's SLO for admission, unless it names its own or the route none.
func rawEPPConfig(mr *igwv1.ModelRoute, raw []byte) ([]byte, error) {
	slo, ok := routeSLO(mr)
	if !ok {
		return raw, nil
	}
	text, err := eppconfig.WithRouteSLO(string(raw), slo)
	if err != nil {
		return nil, fmt.Errorf("render: scoring.configMapRef %s with spec.slo: %w", mr.Spec.Scoring.ConfigMapRef.Name, err)
	}
	return []byte(text), nil
}
