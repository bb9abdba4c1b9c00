package bbr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type apiBody struct {
	name  string
	path  string // the endpoint the body is sent to
	body  []byte
	model string
}

// apiBodies are real request bodies of the four OpenAI APIs the gateway routes,
// as SDKs and tools send them (testdata/requests), plus large ones built here.
func apiBodies() []apiBody {
	return append(requestFiles(),
		apiBody{"chat_1MiB_prompt_model_last", "/v1/chat/completions", chatBody(1<<20, "llama-3-70b", true), "llama-3-70b"},
		apiBody{"chat_1MiB_prompt_model_first", "/v1/chat/completions", chatBody(1<<20, "llama-3-70b", false), "llama-3-70b"},
		apiBody{"embeddings_64KiB_tokens", "/v1/embeddings", tokenBody(64 << 10), "bge"},
	)
}

// requestFiles are the bodies of testdata/requests.
func requestFiles() []apiBody {
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
	var out []apiBody
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", "requests", f.file))
		if err != nil {
			panic(err)
		}
		out = append(out, apiBody{name: strings.TrimSuffix(f.file, ".json"), path: f.path, body: b, model: f.model})
	}
	return out
}

// chatBody is a chat completion whose user message is about size bytes of text with
// the quotes, backslashes and newlines real prompts (code, logs) are full of.
func chatBody(size int, model string, modelLast bool) []byte {
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

// tokenBody is an embeddings request whose input is pre-tokenized: a number-heavy body.
func tokenBody(size int) []byte {
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

func TestExtractModelFromRealBodies(t *testing.T) {
	for _, b := range apiBodies() {
		t.Run(b.name, func(t *testing.T) {
			model, found, err := ExtractModel(b.body)
			if err != nil || !found || model != b.model {
				t.Fatalf("ExtractModel = %q, %v, %v; want %q", model, found, err, b.model)
			}
			checkAgainstReference(t, b.body)
		})
	}
}
