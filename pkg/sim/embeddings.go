package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// embeddingRequest is vLLM's /v1/embeddings request: input is a string, a
// list of strings, a list of token IDs or a list of such lists.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// inputs returns each input's tokens.
func (req *embeddingRequest) inputs() ([][]uint32, error) {
	raw := req.Input
	if ids, ok := parseTokenIDs(raw); ok && len(ids) > 0 {
		return [][]uint32{ids}, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return [][]uint32{tokenizer.Tokenize(text)}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		out := make([][]uint32, len(texts))
		for i, t := range texts {
			out[i] = tokenizer.Tokenize(t)
		}
		return out, nil
	}
	var idLists [][]uint32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) > 0 {
		return idLists, nil
	}
	return nil, badRequest("input", "input must be a string, a list of strings, a list of token IDs or a list of such lists, and not empty")
}

// handleEmbeddings is vLLM's /v1/embeddings for an embedding model profile:
// each input is one sequence the engine prefills (with the one output step
// the engine requires: a pooling pass in vLLM), answered with a unit vector
// derived from its tokens, as floats or base64 of little-endian float32s.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	var req embeddingRequest
	if err := decodeJSON(body, &req); err != nil {
		writeError(w, err)
		return
	}
	adapter, err := s.resolveModel(req.Model)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.embeddingDim == 0 {
		badRequest("model", "The model `%s` does not support the Embeddings API: it is a generative model (an embedding profile such as e5-mistral-7b serves it).", s.opts.Model).write(w)
		return
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		badRequest("encoding_format", "encoding_format must be float or base64, got %q", req.EncodingFormat).write(w)
		return
	}
	if req.Dimensions != nil && *req.Dimensions != s.embeddingDim {
		badRequest("dimensions", "Model does not support matryoshka representation, changing output dimensions will lead to poor results.").write(w)
		return
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		badRequest("input", "input is missing").write(w)
		return
	}
	inputs, err := req.inputs()
	if err != nil {
		writeError(w, err)
		return
	}
	maxLen := s.rt.eng.MaxModelLen()
	promptTokens := 0
	for _, in := range inputs {
		if len(in) == 0 {
			badRequest("input", "an input is empty").write(w)
			return
		}
		if len(in) >= maxLen {
			badRequest("input", "This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", maxLen, len(in)).write(w)
			return
		}
		promptTokens += len(in)
	}
	type pending struct {
		id uint64
		st *stream
	}
	runs := make([]pending, 0, len(inputs))
	abort := func() {
		for _, p := range runs {
			s.rt.abort(p.id)
		}
	}
	for _, in := range inputs {
		id, st, err := s.rt.submit(Request{Adapter: adapter, Prompt: in, OutputTokens: 1, EndsWithStop: true})
		if err != nil {
			abort()
			badRequest("", "%v", err).write(w)
			return
		}
		runs = append(runs, pending{id, st})
	}
	for _, p := range runs {
		if !s.wait(r, p.id, p.st) {
			abort()
			return
		}
	}
	model := req.Model
	if model == "" {
		model = s.servedNames[0]
	}
	b := []byte(`{"id":"embd-` + strconv.FormatUint(runs[0].id, 16) + `","object":"list","created":`)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"data":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"object":"embedding","embedding":`...)
		b = appendEmbedding(b, embedding(in, s.embeddingDim), req.EncodingFormat == "base64")
		b = append(b, '}')
	}
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(promptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(promptTokens), 10)
	b = append(b, `,"completion_tokens":0,"prompt_tokens_details":null}}`...)
	writeRawJSON(w, b)
}

// embedding is the simulated vector of tokens: dim values drawn from a
// generator seeded by the tokens, scaled to unit length as e5 models' are.
// The same input always gets the same vector.
func embedding(tokens []uint32, dim int) []float32 {
	src := splitmix.Source(tokenizer.ChainHash(0, tokens))
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		x := float64(int64(src.Next())) / math.MaxInt64
		v[i] = float32(x)
		norm += x * x
	}
	scale := 1 / math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) * scale)
	}
	return v
}

// appendEmbedding appends v as a JSON array of floats, or as a JSON string of
// base64 little-endian float32s (OpenAI's and vLLM's encoding_format=base64).
func appendEmbedding(b []byte, v []float32, asBase64 bool) []byte {
	if asBase64 {
		raw := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"')
	}
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}
