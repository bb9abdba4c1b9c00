package hftokenizer

import (
	"fmt"
	"unicode/utf8"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model/bpe"
)

// symbol is one part of a word during merging: a vocabulary ID and the
// number of bytes of the word it covers.
type symbol struct{ id, size int }

// merge applies BPE merges to a word's symbols as Hugging Face's tokenizers
// do without dropout: repeatedly the adjacent pair of lowest merge rank,
// leftmost among equal ranks. Both pipelines merge here: the library's own
// merge breaks ties between repeats of one pair in heap order rather than
// leftmost (" ASSS" became " AS"+"SS" where Hugging Face gives " ASS"+"S").
func merge(merges bpe.Merges, syms []symbol) []symbol {
	for len(syms) > 1 {
		best, at := bpe.PairVal{}, -1
		for i := 0; i+1 < len(syms); i++ {
			if pv, ok := merges[bpe.Pair{C1: syms[i].id, C2: syms[i+1].id}]; ok && (at < 0 || pv.Rank < best.Rank) {
				best, at = pv, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = symbol{best.NewId, syms[at].size + syms[at+1].size}
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// bpeModel is the BPE model of the general pipeline: the library's
// vocabulary and merges, with Hugging Face's rules for building a word's
// symbols (continuing-subword prefix on every symbol but the first,
// end-of-word suffix on the last, byte fallback, fused unknowns), the
// ignore_merges option, and the merge above.
type bpeModel struct {
	*bpe.BPE
	ignoreMerges, fuseUnk, byteFallback bool
}

// newBPEModel wraps a BPE model without dropout (dropout is random by
// design: the library keeps it); other models are returned as they are.
func newBPEModel(m tokenizer.Model, cfg map[string]any) tokenizer.Model {
	b, ok := m.(*bpe.BPE)
	if !ok || b.Vocab == nil || b.Merges == nil || b.Dropout != nil && *b.Dropout > 0 {
		return m
	}
	flag := func(key string) bool { v, _ := cfg[key].(bool); return v }
	return &bpeModel{BPE: b, ignoreMerges: flag("ignore_merges"), fuseUnk: flag("fuse_unk"), byteFallback: flag("byte_fallback")}
}

func (m *bpeModel) Tokenize(word string) ([]tokenizer.Token, error) {
	if word == "" {
		return nil, nil
	}
	vocab := *m.Vocab
	if m.ignoreMerges {
		if id, ok := vocab[word]; ok {
			return []tokenizer.Token{{Id: id, Value: word, Offsets: []int{0, len(word)}}}, nil
		}
	}
	prefix, suffix := "", ""
	if m.ContinuingSubwordPrefix != nil {
		prefix = *m.ContinuingSubwordPrefix
	}
	if m.EndOfWordSuffix != nil {
		suffix = *m.EndOfWordSuffix
	}
	var syms []symbol
	unk := false // the last symbol is the unknown token
	for i, size := 0, 0; i < len(word); i += size {
		_, size = utf8.DecodeRuneInString(word[i:])
		s := word[i : i+size]
		if i > 0 {
			s = prefix + s
		}
		if i+size == len(word) {
			s += suffix
		}
		if id, ok := vocab[s]; ok {
			syms, unk = append(syms, symbol{id, size}), false
			continue
		}
		if m.byteFallback {
			if bytes, ok := m.fallbackBytes(word[i : i+size]); ok {
				syms, unk = append(syms, bytes...), false
				continue
			}
		}
		if m.UnkToken == nil {
			return nil, fmt.Errorf("hftokenizer: %q is not in the vocabulary and the model has no unknown token", word[i:i+size])
		}
		unkID, ok := vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("hftokenizer: the unknown token %q is not in the vocabulary", *m.UnkToken)
		}
		if unk && m.fuseUnk {
			syms[len(syms)-1].size += size
			continue
		}
		syms, unk = append(syms, symbol{unkID, size}), true
	}
	syms = merge(*m.Merges, syms)
	tokens := make([]tokenizer.Token, len(syms))
	at := 0
	for i, s := range syms {
		tokens[i] = tokenizer.Token{Id: s.id, Value: (*m.VocabR)[s.id], Offsets: []int{at, at + s.size}}
		at += s.size
	}
	return tokens, nil
}

// fallbackBytes spells bytes as the <0xXX> tokens of a byte-fallback
// vocabulary; false when one is missing. The first covers the character's
// bytes, the others none, as Hugging Face aligns them.
func (m *bpeModel) fallbackBytes(s string) ([]symbol, bool) {
	out := make([]symbol, 0, len(s))
	for i := 0; i < len(s); i++ {
		id, ok := (*m.Vocab)[fmt.Sprintf("<0x%02X>", s[i])]
		if !ok {
			return nil, false
		}
		size := 0
		if i == 0 {
			size = len(s)
		}
		out = append(out, symbol{id, size})
	}
	return out, true
}
