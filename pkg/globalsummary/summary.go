// Package globalsummary is what a member cluster tells the global tier about
// itself: per model it serves, a compact summary of load, speed, errors and a
// digest of the prefix blocks its picker believes the servers hold. The member's
// endpoint picker builds it from its own state (Exporter), serves it over HTTP
// behind a bearer token (NewHandler, TokenFile), and the hub fetches it (Client)
// and decodes it strictly (Decode): a member that sends garbage is told apart
// from one that is merely slow.
//
// Nothing here reads a clock except the HTTP handler's wall-clock default:
// every build carries now.
package globalsummary

import (
	"fmt"
	"math"
	"time"
)

// Version is the document version this build writes and reads.
const Version = 1

// Summary is one member cluster's document.
type Summary struct {
	Version int `json:"version"`
	// Cluster and Region name the member as it calls itself.
	Cluster string `json:"cluster"`
	Region  string `json:"region,omitempty"`
	// GeneratedAt is the member's wall clock when it built the document; the
	// hub times a summary by its own clock on receipt (far regions' clocks
	// disagree), so this is for people and logs.
	GeneratedAt time.Time `json:"generatedAt"`
	// Sequence grows by one with every document the exporter builds.
	Sequence uint64 `json:"sequence"`
	// Models has one entry per model (base model) the member serves, names distinct.
	Models []Model `json:"models"`
}

// Model is the summary of one model's pool in the member cluster.
type Model struct {
	// Model is the base model; Adapters the LoRA adapters its endpoints list.
	Model    string   `json:"model"`
	Adapters []string `json:"adapters,omitempty"`
	// Endpoints is how many endpoints the member's picker knows; ReadyEndpoints
	// how many of them have fresh telemetry.
	Endpoints      int `json:"endpoints"`
	ReadyEndpoints int `json:"readyEndpoints"`
	// Waiting and Running are the requests queued and running over the ready
	// endpoints, corrected for picks since each endpoint's last sample.
	Waiting int `json:"waiting"`
	Running int `json:"running"`
	// QueuedPrefillTokens is the uncached prompt work queued ahead over the
	// ready endpoints (the picker's timing model's work ahead, summed).
	QueuedPrefillTokens float64 `json:"queuedPrefillTokens"`
	// PrefillTokensPerSecond is the ready endpoints' learned prefill rates
	// summed: how fast the queue drains. EndpointPrefillTokensPerSecond is the
	// fastest ready endpoint's: how fast one new prompt is prefilled.
	PrefillTokensPerSecond         float64 `json:"prefillTokensPerSecond"`
	EndpointPrefillTokensPerSecond float64 `json:"endpointPrefillTokensPerSecond"`
	// DecodeStepSeconds is the ready endpoints' mean learned decode step.
	DecodeStepSeconds float64 `json:"decodeStepSeconds"`
	// KVHeadroom is the free share of the ready endpoints' KV cache (0..1,
	// weighted by capacity when every capacity is known); nil when no ready
	// endpoint reports its KV use. KVCapacityTokens is their total KV cache in
	// tokens (0: unknown).
	KVHeadroom       *float64 `json:"kvHeadroom,omitempty"`
	KVCapacityTokens int64    `json:"kvCapacityTokens,omitempty"`
	// ErrorRate is the share of the requests that ended in the error window
	// which failed; Requests is how many ended there.
	ErrorRate float64 `json:"errorRate"`
	Requests  int     `json:"requests"`
	// Digest names the prefix blocks the member's picker believes its servers
	// hold; nil when it has no prefix index.
	Digest *Digest `json:"digest,omitempty"`
}

// Limits of what Validate accepts.
const (
	// MaxDocumentBytes bounds an encoded document (a 1 MiB digest is 1.4 MB in base64).
	MaxDocumentBytes = 4 << 20
	maxNameLength    = 253
	maxModels        = 256
	maxAdapters      = 1024
)

// Validate reports the first thing wrong with s, naming the field.
func (s *Summary) Validate() error {
	if s.Version != Version {
		return fmt.Errorf("version is %d; this build reads version %d", s.Version, Version)
	}
	if err := checkName("cluster", s.Cluster); err != nil {
		return err
	}
	if len(s.Region) > maxNameLength {
		return fmt.Errorf("region is %d characters long; at most %d", len(s.Region), maxNameLength)
	}
	if s.GeneratedAt.IsZero() {
		return fmt.Errorf("generatedAt is required")
	}
	if s.Models == nil {
		return fmt.Errorf("models is required (an empty list when the cluster serves none)")
	}
	if len(s.Models) > maxModels {
		return fmt.Errorf("models has %d entries; at most %d", len(s.Models), maxModels)
	}
	seen := make(map[string]int, len(s.Models))
	for i := range s.Models {
		m := &s.Models[i]
		if err := m.validate(); err != nil {
			return fmt.Errorf("models[%d]: %w", i, err)
		}
		if j, dup := seen[m.Model]; dup {
			return fmt.Errorf("models[%d]: model %q is also models[%d]", i, m.Model, j)
		}
		seen[m.Model] = i
	}
	return nil
}

func (m *Model) validate() error {
	if err := checkName("model", m.Model); err != nil {
		return err
	}
	if len(m.Adapters) > maxAdapters {
		return fmt.Errorf("adapters has %d entries; at most %d", len(m.Adapters), maxAdapters)
	}
	for i, a := range m.Adapters {
		if err := checkName(fmt.Sprintf("adapters[%d]", i), a); err != nil {
			return err
		}
	}
	if m.Endpoints < 0 || m.ReadyEndpoints < 0 || m.ReadyEndpoints > m.Endpoints {
		return fmt.Errorf("endpoints %d and readyEndpoints %d: want 0 <= readyEndpoints <= endpoints", m.Endpoints, m.ReadyEndpoints)
	}
	if m.Waiting < 0 || m.Running < 0 || m.Requests < 0 || m.KVCapacityTokens < 0 {
		return fmt.Errorf("waiting, running, requests and kvCapacityTokens must not be negative")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"queuedPrefillTokens", m.QueuedPrefillTokens},
		{"prefillTokensPerSecond", m.PrefillTokensPerSecond},
		{"endpointPrefillTokensPerSecond", m.EndpointPrefillTokensPerSecond},
		{"decodeStepSeconds", m.DecodeStepSeconds},
	} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s is %v; want a finite number >= 0", f.name, f.v)
		}
	}
	if !(m.ErrorRate >= 0 && m.ErrorRate <= 1) {
		return fmt.Errorf("errorRate is %v; want 0..1", m.ErrorRate)
	}
	if h := m.KVHeadroom; h != nil && !(*h >= 0 && *h <= 1) {
		return fmt.Errorf("kvHeadroom is %v; want 0..1 (or absent when unknown)", *h)
	}
	if m.Digest != nil {
		if err := m.Digest.Validate(); err != nil {
			return fmt.Errorf("digest: %w", err)
		}
	}
	return nil
}

func checkName(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is required", field)
	}
	if len(v) > maxNameLength {
		return fmt.Errorf("%s is %d characters long; at most %d", field, len(v), maxNameLength)
	}
	return nil
}

// Find returns the entry of model, or nil.
func (s *Summary) Find(model string) *Model {
	for i := range s.Models {
		if s.Models[i].Model == model {
			return &s.Models[i]
		}
	}
	return nil
}

// Merge joins the documents of one cluster's pickers (one per model) into the
// cluster's document; a model in two of them is an error.
func Merge(cluster, region string, now time.Time, sequence uint64, docs ...*Summary) (*Summary, error) {
	out := &Summary{Version: Version, Cluster: cluster, Region: region, GeneratedAt: now, Sequence: sequence, Models: []Model{}}
	for _, d := range docs {
		for _, m := range d.Models {
			if out.Find(m.Model) != nil {
				return nil, fmt.Errorf("model %q is summarised by two pickers (cluster %s)", m.Model, d.Cluster)
			}
			out.Models = append(out.Models, m)
		}
	}
	return out, out.Validate()
}
