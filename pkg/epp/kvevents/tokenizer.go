package kvevents

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Tokenizer turns a request's prompt into the token IDs its model server
// computes KV for, so that the picker hashes exactly the blocks the server
// reports. Implementations: pkg/hftokenizer (a Hugging Face tokenizer.json
// for real models) and, registered by the benchmark and tests, the
// simulator's stand-in (the picker never imports the simulator).
type Tokenizer interface {
	// AppendPromptTokens appends the prompt's token IDs to dst. body is the
	// OpenAI request JSON when the caller has it (a chat needs the server's
	// template); without it, text is the prompt.
	AppendPromptTokens(dst []uint32, body []byte, text string) ([]uint32, error)
}

var (
	tokenizersMu sync.RWMutex
	tokenizers   = map[string]Tokenizer{}
)

// RegisterTokenizer names a tokenizer for the configuration
// (tokenizers: {model: name}); a second registration of a name replaces it.
func RegisterTokenizer(name string, t Tokenizer) {
	tokenizersMu.Lock()
	defer tokenizersMu.Unlock()
	tokenizers[name] = t
}

// NamedTokenizer returns a registered tokenizer, or an error listing the
// registered names.
func NamedTokenizer(name string) (Tokenizer, error) {
	tokenizersMu.RLock()
	defer tokenizersMu.RUnlock()
	if t, ok := tokenizers[name]; ok {
		return t, nil
	}
	names := make([]string, 0, len(tokenizers))
	for n := range tokenizers {
		names = append(names, n)
	}
	slices.Sort(names)
	known := "none"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return nil, fmt.Errorf("no tokenizer named %q (registered: %s; a Hugging Face file is hf:/path/to/tokenizer.json)", name, known)
}
