// Package preciseprefixcache scores endpoints by how much of the prompt they
// hold in their KV cache, exactly: from the KV events the model servers
// publish (pkg/epp/kvevents), keyed by the same tokens the server hashes. An
// endpoint whose event stream is not exact (down, gapped beyond replay,
// undecodable, silent, resyncing) is scored from the picker's approximate
// prefix index instead, as prefix-cache scores it; so is every endpoint for a
// request whose prompt cannot be tokenized (no tokenizer for its model, a
// chat the tokenizer cannot render). What an exact endpoint holds is also set
// as the cycle's cached tokens (Cycle.SetCachedTokens), so that the scorers
// after it (predicted-latency) and the pick's accounting price the prefill
// really left.
//
// The scorer is built from the configuration like every plugin; the process
// that runs it binds it to its kvevents.Hub (BindAll), which subscribes to
// every endpoint's events with the scorer's stream parameters.
package preciseprefixcache

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/hftokenizer"
	"github.com/igw-dev/igw/pkg/wire"
)

// Type is the plugin's type name.
const Type = "precise-prefix-cache"

// Parameters of the precise prefix-cache scorer.
type Parameters struct {
	// EventsPort is the port every pod publishes KV events on (vLLM's
	// --kv-events-config endpoint tcp://*:PORT). Default 5557.
	EventsPort int `json:"eventsPort"`
	// ReplayPort is vLLM's replay_endpoint port; 0 turns replay off (gaps are
	// then lost, and a silent pod cannot be told from an idle one). Default 5558.
	ReplayPort *int `json:"replayPort"`
	// Topic is the subscription prefix ("" takes every topic, vLLM's default
	// topic). Default "".
	Topic string `json:"topic"`
	// BlockSize is the servers' KV block size in tokens. Default 16.
	BlockSize int `json:"blockSize"`
	// Tokenizers names, per base model, how to tokenize its prompts:
	// "hf:/path/to/tokenizer.json" (a Hugging Face file) or a name the process
	// registered (kvevents.RegisterTokenizer). The key "*" applies to models
	// not listed.
	Tokenizers map[string]string `json:"tokenizers"`
	// MinMatchTokens is the shortest match that counts, as for prefix-cache.
	// Default 128.
	MinMatchTokens int `json:"minMatchTokens"`
	// MaxPromptTokens bounds how much of a prompt is keyed, or the
	// approximate index's bound where that is more (a share of the largest
	// KV cache a server reported, director.Director.PrefixBlocks). Default
	// 65536.
	MaxPromptTokens int `json:"maxPromptTokens"`
	// ResyncSeconds is how long a pod that lost part of its event history is
	// scored approximately. Default 60.
	ResyncSeconds float64 `json:"resyncSeconds"`
	// ProbeSeconds: a pod silent this long is asked for a replay, which shows
	// it is alive. Default 2. ReplayTimeoutSeconds: an unanswered replay marks
	// the pod down. Default 3.
	ProbeSeconds         float64 `json:"probeSeconds"`
	ReplayTimeoutSeconds float64 `json:"replayTimeoutSeconds"`
}

// DefaultConfig is igw's default configuration (pkg/epp/config.Default) with
// the precise scorer added at weight 1, ahead of predicted-latency, given its
// parameters as a YAML flow mapping ("{blockSize: 16}"): where a pod's events
// are exact, the scorer sets the cycle's cached tokens, so that the latency
// prediction prices the prefill really left. The benchmark's igw-precise
// policy and this package's pick benchmark run it.
func DefaultConfig(parameters string) string {
	return `
plugins:
- name: predicted-latency
  type: predicted-latency
  parameters: {prefillWorkWeight: 1}
- {name: precise, type: ` + Type + `, parameters: ` + parameters + `}
filters: [model-served-filter]
scorers:
- {plugin: precise, weight: 1}
- {plugin: predicted-latency, weight: 1}
- {plugin: running-requests, weight: 0.2}
- {plugin: fair-share-floor, weight: 2}
picker: max-score-picker
`
}

// Scorer gives matched tokens / prompt tokens, exact where the events allow.
type Scorer struct {
	scheduling.Named
	stream     kvevents.StreamConfig
	tokenizers map[string]kvevents.Tokenizer
	minMatch   int
	maxBlocks  int
	hub        atomic.Pointer[kvevents.Hub]
	scratch    sync.Pool
}

var (
	_ scheduling.Scorer      = (*Scorer)(nil)
	_ scheduling.CacheReader = (*Scorer)(nil)
)

// New is the registry factory.
var New = scheduling.WithParameters(Type, Parameters{EventsPort: wire.KVEventsPort, BlockSize: kvevents.DefaultBlockSize,
	MinMatchTokens: scheduling.DefaultMinMatchTokens, MaxPromptTokens: 65536, ResyncSeconds: kvevents.DefaultResyncWindow.Seconds(),
	ProbeSeconds: kvevents.DefaultProbeInterval.Seconds(), ReplayTimeoutSeconds: kvevents.DefaultReplayTimeout.Seconds()}, newScorer)

// newScorer checks the parameters, listing every bad value, and opens the
// tokenizers they name.
func newScorer(n scheduling.Named, p Parameters) (scheduling.Plugin, error) {
	replay := wire.KVEventsReplayPort
	if p.ReplayPort != nil {
		replay = *p.ReplayPort
	}
	var errs []string
	if p.EventsPort < 1 || p.EventsPort > 65535 {
		errs = append(errs, fmt.Sprintf("eventsPort must be in 1..65535, got %d", p.EventsPort))
	}
	if replay < 0 || replay > 65535 || replay == p.EventsPort {
		errs = append(errs, fmt.Sprintf("replayPort must be 0 (off) or a port other than eventsPort, got %d", replay))
	}
	if p.BlockSize < 1 || p.BlockSize > 4096 {
		errs = append(errs, fmt.Sprintf("blockSize must be in 1..4096, got %d", p.BlockSize))
	}
	if p.MinMatchTokens < 1 {
		errs = append(errs, fmt.Sprintf("minMatchTokens must be at least 1, got %d", p.MinMatchTokens))
	}
	if p.MaxPromptTokens < p.BlockSize {
		errs = append(errs, fmt.Sprintf("maxPromptTokens must be at least one block, got %d", p.MaxPromptTokens))
	}
	for field, v := range map[string]float64{"resyncSeconds": p.ResyncSeconds, "probeSeconds": p.ProbeSeconds,
		"replayTimeoutSeconds": p.ReplayTimeoutSeconds} {
		if !(v > 0) {
			errs = append(errs, fmt.Sprintf("%s must be positive, got %v", field, v))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	s := &Scorer{Named: n, minMatch: p.MinMatchTokens,
		maxBlocks: p.MaxPromptTokens / p.BlockSize, tokenizers: map[string]kvevents.Tokenizer{},
		stream: kvevents.StreamConfig{EventsPort: p.EventsPort, ReplayPort: replay, Topic: p.Topic, BlockSize: p.BlockSize,
			ResyncWindow: seconds(p.ResyncSeconds), ProbeInterval: seconds(p.ProbeSeconds), ReplayTimeout: seconds(p.ReplayTimeoutSeconds)}}
	models := make([]string, 0, len(p.Tokenizers))
	for m := range p.Tokenizers {
		models = append(models, m)
	}
	slices.Sort(models)
	for _, model := range models {
		t, err := openTokenizer(p.Tokenizers[model])
		if err != nil {
			errs = append(errs, fmt.Sprintf("tokenizers[%q]: %v", model, err))
			continue
		}
		s.tokenizers[model] = t
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return s, nil
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// hfFiles caches loaded tokenizer files by path, size and modification time:
// a configuration reload does not parse a 9 MB file again.
var hfFiles sync.Map // hfKey → *hftokenizer.Tokenizer

type hfKey struct {
	path  string
	size  int64
	mtime time.Time
}

func openTokenizer(spec string) (kvevents.Tokenizer, error) {
	path, isFile := strings.CutPrefix(spec, "hf:")
	if !isFile {
		return kvevents.NamedTokenizer(spec)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	key := hfKey{path, st.Size(), st.ModTime()}
	if t, ok := hfFiles.Load(key); ok {
		return t.(*hftokenizer.Tokenizer), nil
	}
	t, err := hftokenizer.Load(path)
	if err != nil {
		return nil, err
	}
	hfFiles.Store(key, t)
	return t, nil
}

// StreamConfig is how the scorer's hub reaches the pods.
func (s *Scorer) StreamConfig() kvevents.StreamConfig { return s.stream }

// Bind makes the scorer read h's index and configures h with the scorer's
// stream parameters.
func (s *Scorer) Bind(h *kvevents.Hub) {
	h.Configure(s.stream)
	s.hub.Store(h)
}

// BindAll binds every precise scorer of prof to h, and returns how many
// there were; with none, h stops following pods.
func BindAll(prof *scheduling.Profile, h *kvevents.Hub) int {
	n := 0
	for _, ws := range prof.Scorers {
		if s, ok := ws.Scorer.(*Scorer); ok {
			s.Bind(h)
			n++
		}
	}
	if n == 0 {
		h.Disable()
	}
	return n
}

type scratch struct {
	tokens       []uint32
	promptTokens int
	pods         []string
	matched      []int32
	bySlot       []int32
}

// tokenizerFor returns the model's tokenizer, or the default one.
func (s *Scorer) tokenizerFor(model string) kvevents.Tokenizer {
	if t, ok := s.tokenizers[model]; ok {
		return t
	}
	return s.tokenizers["*"]
}

// ReadCache implements scheduling.CacheReader: it sets the cycle's cached
// tokens of every candidate whose event stream is exact, and the prompt's
// token count, when the prompt can be tokenized.
func (s *Scorer) ReadCache(c *scheduling.Cycle, cands []*datastore.View) {
	hub := s.hub.Load()
	if hub == nil {
		return
	}
	sc, _ := s.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer s.scratch.Put(sc)
	if !s.exactMatches(c, hub, cands, sc) {
		return
	}
	c.SetTokenizedPromptTokens(sc.promptTokens)
	for i, v := range cands {
		if sc.matched[i] >= 0 {
			c.SetCachedTokens(v, int(sc.matched[i])*s.stream.BlockSize)
		}
	}
}

// Score implements scheduling.Scorer, from what ReadCache recorded in the
// cycle (Profile.Run makes sure it ran).
func (s *Scorer) Score(c *scheduling.Cycle, cands []*datastore.View, scores []float64) {
	tokenized := c.TokenizedPromptTokens()
	approx := 0
	for i, v := range cands {
		cached, exact := c.ExactCachedTokens(v)
		total := tokenized
		if !exact {
			cached, total = c.CachedTokens(v), c.PromptTokens
			approx++
		}
		if total > 0 && cached >= s.minMatch {
			scores[i] = min(1, float64(cached)/float64(total))
		}
	}
	if hub := s.hub.Load(); hub != nil {
		switch {
		case tokenized == 0:
			hub.CountScores(kvevents.ScoreApproximateTokenizer, len(cands))
		default:
			hub.CountScores(kvevents.ScoreApproximateStream, approx)
			hub.CountScores(kvevents.ScoreExact, len(cands)-approx)
		}
	}
}

// exactMatches fills sc.matched with each candidate's matched blocks (-1
// where its stream is not exact); false when the prompt has no tokens.
func (s *Scorer) exactMatches(c *scheduling.Cycle, hub *kvevents.Hub, cands []*datastore.View, sc *scratch) bool {
	req := c.Request
	sc.tokens = sc.tokens[:0]
	tokens := req.TokenIDs
	if tokens == nil {
		t := s.tokenizerFor(req.Model)
		if t == nil {
			return false
		}
		var err error
		if sc.tokens, err = t.AppendPromptTokens(sc.tokens, req.Body, req.Prompt); err != nil {
			return false
		}
		tokens = sc.tokens
	}
	if len(tokens) == 0 {
		return false
	}
	sc.promptTokens = len(tokens)
	sc.pods = sc.pods[:0]
	for _, v := range cands {
		sc.pods = append(sc.pods, v.Key)
	}
	// Keyed to 64k tokens whatever the cache, igw-precise failed or served
	// past the SLO 142 and 90 requests of the Mooncake windows (conversation,
	// synthetic; des, at 0.85 and 0.95 of each window's oracle capacity) with
	// 2M tokens of cache per server, and 131 and 82 with 4M; keyed as far as
	// the approximate index, 124 and 75, and 115 and 73.
	maxBlocks := max(s.maxBlocks, c.MaxPrefixTokens()/s.stream.BlockSize)
	sc.matched, sc.bySlot = hub.Index().MatchPrompt(kvevents.Seed(req.Adapter), tokens, maxBlocks, sc.pods, sc.matched, sc.bySlot)
	return true
}
