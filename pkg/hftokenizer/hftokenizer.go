// Package hftokenizer loads a Hugging Face tokenizer.json (the file vLLM's
// tokenizer reads) with a pure-Go library, github.com/sugarme/tokenizer, so
// the endpoint picker can compute the token IDs a real model server hashes
// into KV blocks.
//
// The library reads the file and runs the BPE model; its general pipeline
// (normalizers, added-token splitting, post-processors) serves files outside
// the common byte-level BPE shape, which a faster path here runs on plain
// strings (fast.go). Two parts of current files it cannot
// run are done here: the pre-tokenizer regular expression of GPT-4-style
// vocabularies (Llama 3, Qwen 2, ...) uses a look-ahead that Go's regexp
// lacks, so it is matched by hand (pattern.go); and its ByteLevel step always
// re-splits with GPT-2's expression, ignoring use_regex: false, so the byte
// mapping is applied here. BPE words are merged here too (bpe.go): the
// library's merge breaks ties unlike Hugging Face's, and lacks ignore_merges
// and byte fallback.
//
// Chat requests need the model's chat template, which lives in
// tokenizer_config.json as Jinja; it is not rendered here: AppendPromptTokens
// tokenizes completion prompts and returns ErrChatTemplate for chats, and the
// picker scores such requests from its approximate index.
package hftokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretokenizer"
	"github.com/sugarme/tokenizer/pretrained"

	"github.com/igw-dev/igw/internal/loadfile"
)

// Tokenizer is a loaded tokenizer.json. Safe for concurrent use once loaded.
type Tokenizer struct {
	tk   *tokenizer.Tokenizer
	fast *fastPath // nil: the library's general pipeline
	// addSpecial is vLLM's add_special_tokens for completion prompts (true):
	// the post-processor's BOS, if the file has one.
	addSpecial bool
}

// ErrChatTemplate is returned for chat requests: rendering the model's chat
// template is not supported.
var ErrChatTemplate = errors.New("hftokenizer: chat requests need the model's chat template, which is not rendered")

// Load reads a tokenizer.json.
func Load(path string) (*Tokenizer, error) { return loadfile.Parse(path, Parse) }

// Parse builds a tokenizer from a tokenizer.json's bytes.
func Parse(data []byte) (t *Tokenizer, err error) {
	// The library panics on some malformed configurations (it type-asserts
	// JSON values); a bad file must be an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("hftokenizer: unsupported or malformed tokenizer.json: %v", r)
		}
	}()
	var cfg tokenizer.Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("hftokenizer: not a tokenizer.json: %w", err)
	}
	if cfg.Model == nil {
		return nil, errors.New("hftokenizer: tokenizer.json has no model")
	}
	model, err := pretrained.CreateModel(&cfg)
	if err != nil {
		return nil, fmt.Errorf("hftokenizer: model: %w", err)
	}
	model = newBPEModel(model, cfg.Model)
	tk := tokenizer.NewTokenizer(model)
	if cfg.Normalizer != nil {
		n, err := pretrained.CreateNormalizer(cfg.Normalizer)
		if err != nil {
			return nil, fmt.Errorf("hftokenizer: normalizer: %w", err)
		}
		tk.WithNormalizer(n)
	}
	if cfg.PreTokenizer != nil {
		pt, err := preTokenizer(cfg.PreTokenizer)
		if err != nil {
			return nil, fmt.Errorf("hftokenizer: pre_tokenizer: %w", err)
		}
		tk.WithPreTokenizer(pt)
	}
	if cfg.PostProcessor != nil {
		pp, err := pretrained.CreatePostProcessor(cfg.PostProcessor)
		if err != nil {
			return nil, fmt.Errorf("hftokenizer: post_processor: %w", err)
		}
		tk.WithPostProcessor(pp)
	}
	special, added := pretrained.CreateAddedTokens(cfg.AddedTokens)
	if len(special) > 0 {
		tk.AddSpecialTokens(special)
	}
	if len(added) > 0 {
		tk.AddTokens(added)
	}
	return &Tokenizer{tk: tk, fast: newFastPath(&cfg, model), addSpecial: true}, nil
}

// Encode returns text's token IDs; addSpecial adds what the post-processor
// adds around a sequence (a BOS token, for files whose template has one).
func (t *Tokenizer) Encode(text string, addSpecial bool) (ids []uint32, err error) {
	if t.fast != nil {
		return t.fast.encode(nil, text, addSpecial)
	}
	return t.encodeGeneral(text, addSpecial)
}

// encodeGeneral runs the library's own pipeline.
func (t *Tokenizer) encodeGeneral(text string, addSpecial bool) (ids []uint32, err error) {
	defer func() {
		if r := recover(); r != nil {
			ids, err = nil, fmt.Errorf("hftokenizer: encoding failed: %v", r)
		}
	}()
	if text == "" {
		return nil, nil
	}
	enc, err := t.tk.EncodeSingle(text, addSpecial)
	if err != nil {
		return nil, err
	}
	ids = make([]uint32, len(enc.Ids))
	for i, id := range enc.Ids {
		ids[i] = uint32(id)
	}
	return ids, nil
}

// AppendPromptTokens implements the picker's tokenizer interface
// (kvevents.Tokenizer): a completion prompt's token IDs, with special tokens
// added as vLLM adds them for /v1/completions.
func (t *Tokenizer) AppendPromptTokens(dst []uint32, body []byte, text string) ([]uint32, error) {
	if len(body) > 0 {
		var req struct {
			Prompt   json.RawMessage `json:"prompt"`
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return dst, err
		}
		if len(req.Messages) > 0 {
			return dst, ErrChatTemplate
		}
		var ids []uint32
		if json.Unmarshal(req.Prompt, &ids) == nil {
			return append(dst, ids...), nil // token IDs are what the server uses
		}
		if err := json.Unmarshal(req.Prompt, &text); err != nil {
			return dst, fmt.Errorf("hftokenizer: prompt must be a string or token IDs")
		}
	}
	if t.fast != nil {
		return t.fast.encode(dst, text, t.addSpecial)
	}
	ids, err := t.encodeGeneral(text, t.addSpecial)
	return append(dst, ids...), err
}

// preTokenizer builds the pre-tokenizer, substituting the parts the library
// gets wrong or cannot compile.
func preTokenizer(cfg map[string]any) (tokenizer.PreTokenizer, error) {
	switch cfg["type"] {
	case "Sequence":
		list, _ := cfg["pretokenizers"].([]any)
		var seq sequence
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("pretokenizers[%d] is not an object", i)
			}
			pt, err := preTokenizer(m)
			if err != nil {
				return nil, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			seq = append(seq, pt)
		}
		return seq, nil
	case "Split":
		pat, _ := cfg["pattern"].(map[string]any)
		re, isRegex := pat["Regex"].(string)
		if !isRegex {
			return pretrained.CreatePreTokenizer(cfg)
		}
		var p normalizer.Pattern
		switch {
		case re == gpt4Pattern:
			p = patternFunc(matchGPT4)
		default:
			compiled, err := regexp.Compile(re)
			if err != nil {
				return nil, fmt.Errorf("split regex %q: %v (Go's regexp has no look-around; of such patterns only the GPT-4/Llama 3 one is supported)", re, err)
			}
			_ = compiled
			p = normalizer.NewRegexpPattern(re)
		}
		behavior, err := splitBehavior(cfg["behavior"])
		if err != nil {
			return nil, err
		}
		invert, _ := cfg["invert"].(bool)
		if invert {
			return nil, errors.New("an inverted regex split is not supported")
		}
		return pretokenizer.NewSplit(p, behavior, false), nil
	case "ByteLevel":
		addPrefix, _ := cfg["add_prefix_space"].(bool)
		useRegex := true
		if v, ok := cfg["use_regex"].(bool); ok {
			useRegex = v
		}
		return byteLevel{addPrefixSpace: addPrefix, useRegex: useRegex}, nil
	}
	return pretrained.CreatePreTokenizer(cfg)
}

func splitBehavior(v any) (normalizer.SplitDelimiterBehavior, error) {
	switch v {
	case "Isolated":
		return normalizer.IsolatedBehavior, nil
	case "Removed":
		return normalizer.RemovedBehavior, nil
	case "MergedWithPrevious":
		return normalizer.MergedWithPreviousBehavior, nil
	case "MergedWithNext":
		return normalizer.MergedWithNextBehavior, nil
	case "Contiguous":
		return normalizer.ContiguousBehavior, nil
	}
	return 0, fmt.Errorf("unknown split behavior %v", v)
}

// sequence runs pre-tokenizers in order.
type sequence []tokenizer.PreTokenizer

func (s sequence) PreTokenize(p *tokenizer.PreTokenizedString) (*tokenizer.PreTokenizedString, error) {
	var err error
	for _, pt := range s {
		if p, err = pt.PreTokenize(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// byteLevel is Hugging Face's ByteLevel pre-tokenizer: optionally a leading
// space, optionally GPT-2's split, then every byte mapped to its printable
// stand-in character.
type byteLevel struct {
	addPrefixSpace bool
	useRegex       bool
}

func (b byteLevel) PreTokenize(p *tokenizer.PreTokenizedString) (*tokenizer.PreTokenizedString, error) {
	// The mapping is done inside Split: the library's Normalize drops the
	// splits that already hold tokens (the special tokens found in the text).
	return p.Split(func(_ int, n *normalizer.NormalizedString) []tokenizer.SplitIdx {
		if b.addPrefixSpace && len(n.GetNormalized()) > 0 && n.GetNormalized()[0] != ' ' {
			n = n.Prepend(" ")
		}
		if !b.useRegex {
			return []tokenizer.SplitIdx{{Normalized: toByteChars(n)}}
		}
		var out []tokenizer.SplitIdx
		for _, s := range n.Split(patternFunc(matchGPT2), normalizer.IsolatedBehavior) {
			piece := s
			out = append(out, tokenizer.SplitIdx{Normalized: toByteChars(&piece)})
		}
		return out
	}), nil
}

// toByteChars maps every byte to the printable character byte-level BPE
// vocabularies spell it with.
func toByteChars(n *normalizer.NormalizedString) *normalizer.NormalizedString {
	s := n.GetNormalized()
	changes := make([]normalizer.ChangeMap, 0, len(s))
	for _, r := range s {
		for i, c := range []byte(string(r)) {
			change := 0
			if i > 0 {
				change = 1
			}
			changes = append(changes, normalizer.ChangeMap{RuneVal: pretokenizer.BytesChar[c], Changes: change})
		}
	}
	return n.Transform(changes, 0)
}
