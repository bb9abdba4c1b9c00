package hftokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model/bpe"
	"github.com/sugarme/tokenizer/pretokenizer"
)

// fastPath runs the common byte-level BPE pipeline (no normalizer; a regex
// split and/or ByteLevel; plain added tokens; ByteLevel or template
// post-processing) on plain strings, merging with the vocabulary and merge
// ranks the library loaded. The library's general pipeline tracks every
// byte's alignment through each step and seeds a random source per word (for
// dropout), about 17 µs per word; this one gives the same IDs (the tests hold
// both to the reference) at a fraction of that. Files it does not
// cover use the general pipeline.
type fastPath struct {
	vocab        map[string]int
	merges       bpe.Merges
	ignoreMerges bool
	// added are the added tokens, longest first per leading byte.
	added map[byte][]addedToken
	split matcher // nil: no split before ByteLevel
	// byteLevel settings
	prefixSpace bool
	gpt2Split   bool
	// bos and eos are what the post-processor puts around a sequence.
	bos, eos []uint32

	mu    sync.RWMutex
	cache map[string][]uint32
}

type addedToken struct {
	content string
	id      uint32
}

const maxCachedWords = 1 << 16

// newFastPath returns nil when the configuration needs the general pipeline.
func newFastPath(cfg *tokenizer.Config, model tokenizer.Model) *fastPath {
	m, ok := model.(*bpeModel)
	if !ok || cfg.Normalizer != nil || m.byteFallback ||
		m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil
	}
	f := &fastPath{vocab: *m.Vocab, merges: *m.Merges, ignoreMerges: m.ignoreMerges, added: map[byte][]addedToken{}, cache: map[string][]uint32{}}
	for _, t := range cfg.AddedTokens {
		if t.Lstrip || t.Rstrip || t.SingleWord || t.Content == "" || (t.Normalized && !t.Special) {
			return nil
		}
		f.added[t.Content[0]] = append(f.added[t.Content[0]], addedToken{t.Content, uint32(t.Id)})
	}
	for b := range f.added {
		slices.SortFunc(f.added[b], func(x, y addedToken) int { return len(y.content) - len(x.content) })
	}
	if !f.preTokenizer(cfg.PreTokenizer) || !f.postProcessor(cfg.PostProcessor) {
		return nil
	}
	return f
}

func (f *fastPath) preTokenizer(cfg map[string]any) bool {
	var steps []map[string]any
	switch cfg["type"] {
	case "Sequence":
		list, _ := cfg["pretokenizers"].([]any)
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return false
			}
			steps = append(steps, m)
		}
	case "ByteLevel", "Split":
		steps = []map[string]any{cfg}
	default:
		return false
	}
	sawByteLevel := false
	for i, st := range steps {
		switch st["type"] {
		case "Split":
			pat, _ := st["pattern"].(map[string]any)
			re, ok := pat["Regex"].(string)
			if i != 0 || !ok || st["behavior"] != "Isolated" || st["invert"] == true {
				return false
			}
			if re == gpt4Pattern {
				f.split = matchGPT4
			} else if compiled, err := regexp.Compile(re); err == nil {
				f.split = regexpMatcher(compiled)
			} else {
				return false
			}
		case "ByteLevel":
			if i != len(steps)-1 {
				return false
			}
			sawByteLevel = true
			f.prefixSpace, _ = st["add_prefix_space"].(bool)
			f.gpt2Split = true
			if v, ok := st["use_regex"].(bool); ok {
				f.gpt2Split = v
			}
		default:
			return false
		}
	}
	return sawByteLevel
}

// regexpMatcher matches a Go-compilable split regex at the start of s; text
// between matches becomes its own piece, as Isolated splitting keeps it.
func regexpMatcher(re *regexp.Regexp) matcher {
	return func(s string) int {
		loc := re.FindStringIndex(s)
		switch {
		case loc == nil:
			return len(s)
		case loc[0] > 0:
			return loc[0]
		case loc[1] == 0:
			return 0
		}
		return loc[1]
	}
}

func (f *fastPath) postProcessor(cfg map[string]any) bool {
	if cfg == nil {
		return true
	}
	switch cfg["type"] {
	case "ByteLevel":
		return true
	case "Sequence":
		list, _ := cfg["processors"].([]any)
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok || !f.postProcessor(m) {
				return false
			}
		}
		return true
	case "TemplateProcessing":
		raw, err := json.Marshal(cfg)
		if err != nil {
			return false
		}
		var tp struct {
			Single []struct {
				SpecialToken *struct{ ID string } `json:"SpecialToken"`
				Sequence     *struct{ ID string } `json:"Sequence"`
			} `json:"single"`
			SpecialTokens map[string]struct {
				IDs []uint32 `json:"ids"`
			} `json:"special_tokens"`
		}
		if json.Unmarshal(raw, &tp) != nil {
			return false
		}
		seen := false
		for _, item := range tp.Single {
			switch {
			case item.SpecialToken != nil:
				st, ok := tp.SpecialTokens[item.SpecialToken.ID]
				if !ok {
					return false
				}
				if seen {
					f.eos = append(f.eos, st.IDs...)
				} else {
					f.bos = append(f.bos, st.IDs...)
				}
			case item.Sequence != nil && item.Sequence.ID == "A" && !seen:
				seen = true
			default:
				return false
			}
		}
		return seen
	}
	return false
}

// encode appends text's IDs to dst.
func (f *fastPath) encode(dst []uint32, text string, addSpecial bool) ([]uint32, error) {
	if addSpecial {
		dst = append(dst, f.bos...)
	}
	var err error
	for start, i := 0, 0; ; {
		if i == len(text) {
			dst, err = f.segment(dst, text[start:])
			break
		}
		if t, ok := f.addedAt(text[i:]); ok {
			if dst, err = f.segment(dst, text[start:i]); err != nil {
				return dst, err
			}
			dst = append(dst, t.id)
			i += len(t.content)
			start = i
			continue
		}
		i++
	}
	if err != nil {
		return dst, err
	}
	if addSpecial {
		dst = append(dst, f.eos...)
	}
	return dst, nil
}

func (f *fastPath) addedAt(s string) (addedToken, bool) {
	for _, t := range f.added[s[0]] {
		if strings.HasPrefix(s, t.content) {
			return t, true
		}
	}
	return addedToken{}, false
}

// segment encodes text free of added tokens.
func (f *fastPath) segment(dst []uint32, text string) ([]uint32, error) {
	if text == "" {
		return dst, nil
	}
	var err error
	piece := func(p string) {
		if err != nil {
			return
		}
		if f.prefixSpace && p[0] != ' ' {
			p = " " + p
		}
		if !f.gpt2Split {
			dst, err = f.word(dst, p)
			return
		}
		for len(p) > 0 && err == nil {
			n := matchGPT2(p)
			dst, err = f.word(dst, p[:n])
			p = p[n:]
		}
	}
	if f.split == nil {
		piece(text)
		return dst, err
	}
	for len(text) > 0 && err == nil {
		n := f.split(text)
		if n <= 0 {
			n = len(text)
		}
		piece(text[:n])
		text = text[n:]
	}
	return dst, err
}

// word byte-maps one pre-token and runs the BPE model on it.
func (f *fastPath) word(dst []uint32, w string) ([]uint32, error) {
	f.mu.RLock()
	ids, ok := f.cache[w]
	f.mu.RUnlock()
	if ok {
		return append(dst, ids...), nil
	}
	ids, err := f.bpe(w)
	if err != nil {
		return dst, err
	}
	f.mu.Lock()
	if len(f.cache) >= maxCachedWords {
		clear(f.cache)
	}
	f.cache[w] = ids
	f.mu.Unlock()
	return append(dst, ids...), nil
}

// bpe merges one pre-token's byte characters.
func (f *fastPath) bpe(w string) ([]uint32, error) {
	var sb strings.Builder
	syms := make([]symbol, 0, len(w))
	for i := 0; i < len(w); i++ {
		c := pretokenizer.BytesChar[w[i]]
		sb.WriteString(c)
		id, ok := f.vocab[c]
		if !ok {
			return nil, fmt.Errorf("hftokenizer: byte %#x has no token in the vocabulary", w[i])
		}
		syms = append(syms, symbol{id, 1})
	}
	if f.ignoreMerges {
		if id, ok := f.vocab[sb.String()]; ok {
			return []uint32{uint32(id)}, nil
		}
	}
	syms = merge(f.merges, syms)
	ids := make([]uint32, len(syms))
	for i, s := range syms {
		ids[i] = uint32(s.id)
	}
	return ids, nil
}
