// Package bodytest holds OpenAI request bodies for the tests and benchmarks
// of the packages that read them (requestbody, the body-based router, the
// picker, the gateway): real bodies of the four APIs as SDKs and tools send
// them, and large ones built to size.
package bodytest

import (
	"embed"
	"strings"
)

// Body is one request body.
type Body struct {
	Name  string
	Path  string // the endpoint it is sent to
	Body  []byte
	Model string
}

//go:embed requests/*.json
var requests embed.FS

// Requests are the real bodies (requests/*.json).
func Requests() []Body {
	files := []struct{ file, path, model string }{
		{"chat_completions.json", "/v1/chat/completions", "meta-llama/Llama-3.1-8B-Instruct"},
		{"chat_completions_lora.json", "/v1/chat/completions", "sql-lora"},
		{"completions.json", "/v1/completions", "Qwen/Qwen3-32B"},
		{"completions_token_prompt.json", "/v1/completions", "mistralai/Mistral-7B-Instruct-v0.3"},
		{"embeddings.json", "/v1/embeddings", "BAAI/bge-m3"},
		{"embeddings_tokens.json", "/v1/embeddings", "intfloat/e5-mistral-7b-instruct"},
		{"responses.json", "/v1/responses", "openai/gpt-oss-20b"},
		{"responses_string_input.json", "/v1/responses", "gpt-oss-120b-lora-pirate"},
	}
	var out []Body
	for _, f := range files {
		b, err := requests.ReadFile("requests/" + f.file)
		if err != nil {
			panic(err)
		}
		out = append(out, Body{Name: strings.TrimSuffix(f.file, ".json"), Path: f.path, Body: b, Model: f.model})
	}
	return out
}

// All are the real bodies plus large ones: 1 MiB chats with the model first
// and last, and a 64 KiB pre-tokenized embeddings request.
func All() []Body {
	return append(Requests(),
		Body{"chat_1MiB_prompt_model_last", "/v1/chat/completions", Chat(1<<20, "llama-3-70b", true), "llama-3-70b"},
		Body{"chat_1MiB_prompt_model_first", "/v1/chat/completions", Chat(1<<20, "llama-3-70b", false), "llama-3-70b"},
		Body{"embeddings_64KiB_tokens", "/v1/embeddings", Tokens(64 << 10), "bge"},
	)
}

// Chat is a chat completion whose user message is about size bytes of text with
// the quotes, backslashes and newlines real prompts (code, logs) are full of.
func Chat(size int, model string, modelLast bool) []byte {
	line := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(`func main() { fmt.Println("hello, \"world\"") } // a\b\n`) + `\n`
	var content strings.Builder
	content.Grow(size + len(line))
	for content.Len() < size {
		content.WriteString(line)
	}
	msgs := `"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` + content.String() + `"}]`
	if modelLast {
		return []byte(`{` + msgs + `,"stream":true,"max_tokens":512,"model":"` + model + `"}`)
	}
	return []byte(`{"model":"` + model + `",` + msgs + `,"stream":true,"max_tokens":512}`)
}

// Tokens is an embeddings request whose input is pre-tokenized: a number-heavy body.
func Tokens(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"input":[[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString([]string{"128000", "791", "6864", "315", "9822", "374"}[i%6])
	}
	b.WriteString(`]],"model":"bge"}`)
	return []byte(b.String())
}
