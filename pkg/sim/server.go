package sim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/openaimodels"
)

// maxBodyBytes bounds a request body; the longest prompt the profiles allow is
// well under it.
const maxBodyBytes = 64 << 20

// Server is the real-time simulator: an Engine behind vLLM's OpenAI-compatible
// HTTP API, /health and /metrics.
type Server struct {
	opts        Options
	rt          *realtime
	servedNames []string
	started     time.Time
	// embeddingDim is the embedding model profile's vector length; 0 for a
	// generative model.
	embeddingDim int

	// kvEvents publishes KV cache events (nil without --kv-events-config).
	kvEvents *KVEventPublisher

	mu       sync.Mutex // guards adapters and loraInfo
	adapters map[string]LoRAModule
	loraInfo loraInfoHistory
	snap     Snapshot
}

// NewServer builds a server from validated options.
func NewServer(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg, _ := opts.EngineConfig()
	eng, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := eng.SetFaults(opts.Faults); err != nil {
		return nil, err
	}
	s := &Server{
		opts:        opts,
		rt:          newRealtime(eng, opts.Speedup),
		servedNames: opts.servedNames(),
		started:     time.Now(),
		adapters:    make(map[string]LoRAModule),
	}
	if m, err := LookupModel(opts.Model); err == nil {
		s.embeddingDim = m.EmbeddingDim
	}
	for _, mod := range opts.LoRAModules {
		if mod.BaseModelName != "" && !slices.Contains(s.servedNames, mod.BaseModelName) {
			return nil, fmt.Errorf("adapter %q: base model %q is not served", mod.Name, mod.BaseModelName)
		}
		if slices.Contains(s.servedNames, mod.Name) {
			return nil, fmt.Errorf("adapter %q has the name of the base model", mod.Name)
		}
		s.adapters[mod.Name] = mod
	}
	if opts.KVEvents.Enabled() {
		if err := s.startKVEvents(eng); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startKVEvents opens the event sockets and hooks the publisher to the engine.
func (s *Server) startKVEvents(eng *Engine) error {
	cfg := s.opts.KVEvents
	pub, err := NewKVEventPublisher(cfg, s.opts.Host, s.rt.wallTime)
	if err != nil {
		return err
	}
	none := NoneHash(cfg.HashSeed)
	if !cfg.HashSeedSet {
		_, _ = rand.Read(none[:]) // vLLM without PYTHONHASHSEED: a random chain seed
	}
	if err := eng.enableKVEvents(pub, none); err != nil {
		pub.Close()
		return err
	}
	s.kvEvents = pub
	return nil
}

// KVEvents is the KV event publisher, nil when events are off.
func (s *Server) KVEvents() *KVEventPublisher { return s.kvEvents }

// Close releases the KV event sockets; Serve does it when it returns.
func (s *Server) Close() {
	if s.kvEvents != nil {
		s.kvEvents.Close()
	}
}

// Serve answers on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.Close()
	go s.rt.run(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Requests end with the server: streams in flight stop instead of
		// holding Shutdown until their clients give up.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shutdown)
		return nil
	}
}

// Start runs the engine clock until ctx ends, for callers that mount Handler
// in their own http.Server (Serve does this itself).
func (s *Server) Start(ctx context.Context) {
	go func() {
		s.rt.run(ctx)
		s.Close()
	}()
}

// Handler routes the vLLM API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.generationHandler(s.completionGeneration))
	mux.HandleFunc("POST /v1/chat/completions", s.generationHandler(s.chatGeneration))
	mux.HandleFunc("POST /v1/responses", s.generationHandler(s.responsesGeneration))
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /v1/load_lora_adapter", s.handleLoadAdapter)
	mux.HandleFunc("POST /v1/unload_lora_adapter", s.handleUnloadAdapter)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"version": "igw-modelsim"})
	})
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("POST /reset_prefix_cache", s.handleResetPrefixCache)
	mux.HandleFunc("GET /debug/kv_blocks", s.handleKVBlocks)
	return apierror.RoutesWriting(mux, "The simulator serves vLLM's OpenAI API: POST /v1/completions, /v1/chat/completions, /v1/responses, /v1/embeddings; GET /v1/models.",
		func(w http.ResponseWriter, e *apierror.Error) {
			// vLLM names the type after the exception: NotFoundError, MethodNotAllowedError.
			typ := strings.ReplaceAll(http.StatusText(e.Status), " ", "") + "Error"
			(&apiError{Status: e.Status, Type: typ, Message: e.Message}).write(w)
		})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "BadRequestError",
				Message: fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes)}
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

// generationHandler serves the generation build makes of the request body.
func (s *Server) generationHandler(build func(body []byte) (*generation, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, aerr := readBody(w, r)
		if aerr != nil {
			aerr.write(w)
			return
		}
		gen, err := build(body)
		if err != nil {
			writeError(w, err)
			return
		}
		s.generate(w, r, gen)
	}
}

func (s *Server) completionGeneration(body []byte) (*generation, error) {
	req, err := parseCompletion(body)
	if err != nil {
		return nil, err
	}
	return s.newGeneration(req, false)
}

func (s *Server) chatGeneration(body []byte) (*generation, error) {
	req, err := parseChat(body)
	if err != nil {
		return nil, err
	}
	return s.newGeneration(req, true)
}

func (s *Server) responsesGeneration(body []byte) (*generation, error) {
	req, err := parseResponses(body)
	if err != nil {
		return nil, err
	}
	gen, err := s.newGeneration(req, true)
	if err != nil {
		return nil, err
	}
	gen.responses = true
	gen.includeUsage = true // response.completed carries it
	return gen, nil
}

// newGeneration resolves the model req names, then reads the prompt: an
// unknown model is reported before a bad prompt.
func (s *Server) newGeneration(req promptRequest, chat bool) (*generation, error) {
	f := req.sampling()
	adapter, err := s.resolveModel(f.Model)
	if err != nil {
		return nil, err
	}
	if s.embeddingDim > 0 {
		return nil, badRequest("model", "The model `%s` is an embedding model: it serves /v1/embeddings only.", s.opts.Model)
	}
	prompt, err := req.promptTokens()
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, badRequest("prompt", "the prompt is empty")
	}
	n, stop, err := f.outputLength(prompt, s.rt.eng.MaxModelLen(), chat)
	if err != nil {
		return nil, err
	}
	gen := &generation{chat: chat, model: f.Model, adapter: adapter, prompt: prompt, output: n,
		endsWithStop: stop, stream: f.Stream}
	if gen.model == "" {
		gen.model = s.servedNames[0]
	}
	if f.Stream && f.StreamOptions != nil {
		gen.includeUsage = f.StreamOptions.IncludeUsage
		gen.continuousUsage = f.StreamOptions.IncludeUsage && f.StreamOptions.ContinuousUsageStats
	}
	return gen, nil
}

// resolveModel maps the request's model to an adapter name ("" for the base
// model); an omitted model means the base model, as in vLLM.
func (s *Server) resolveModel(model string) (string, error) {
	if model == "" || slices.Contains(s.servedNames, model) {
		return "", nil
	}
	s.mu.Lock()
	_, ok := s.adapters[model]
	s.mu.Unlock()
	if !ok {
		return "", modelNotFound(model)
	}
	return model, nil
}

// generate runs a parsed request and writes its response, streamed or whole.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, gen *generation) {
	id, st, err := s.rt.submit(Request{Adapter: gen.adapter, Prompt: gen.prompt, OutputTokens: gen.output, EndsWithStop: gen.endsWithStop})
	switch {
	case errors.Is(err, ErrRefused):
		panic(http.ErrAbortHandler) // the closest a running listener gets to a refused connection
	case errors.Is(err, ErrFailFast):
		internalError(err).write(w)
		return
	case err != nil:
		badRequest("", "%v", err).write(w)
		return
	}
	var resp renderer = newResponder(gen, id, s.opts.EnablePromptTokensDetails)
	if gen.responses {
		resp = newResponsesRenderer(gen, id)
	}
	if !gen.stream {
		if !s.wait(r, id, st) {
			return
		}
		_, _, fin := s.rt.progress(st)
		writeRawJSON(w, resp.whole(fin))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	sent := 0
	for {
		select {
		case <-st.ready:
		case <-r.Context().Done():
			s.rt.abort(id)
			return
		}
		tokens, done, fin := s.rt.progress(st)
		if fin.Kind == EventFailed {
			panic(http.ErrAbortHandler) // the pod crashed: the stream breaks off
		}
		if tokens > sent || done {
			if _, err := w.Write(resp.chunk(sent, tokens, done, fin)); err != nil {
				s.rt.abort(id)
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			sent = tokens
		}
		if done {
			return
		}
	}
}

// wait blocks until the request finishes; false if the client went away first.
func (s *Server) wait(r *http.Request, id uint64, st *stream) bool {
	for {
		select {
		case <-st.ready:
			if _, done, fin := s.rt.progress(st); done {
				if fin.Kind == EventFailed {
					panic(http.ErrAbortHandler)
				}
				return true
			}
		case <-r.Context().Done():
			s.rt.abort(id)
			return false
		}
	}
}

// modelCard is vLLM's entry of the model list: the OpenAI shape with vLLM's
// max_model_len and permission.
type modelCard struct {
	openaimodels.Model
	MaxModelLen *int  `json:"max_model_len"`
	Permission  []any `json:"permission"`
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	created := s.started.Unix()
	maxLen := s.rt.eng.MaxModelLen()
	cards := []modelCard{}
	for _, name := range s.servedNames {
		cards = append(cards, modelCard{Model: openaimodels.Model{ID: name, Object: "model", Created: created, OwnedBy: "vllm",
			Root: s.opts.Model}, MaxModelLen: &maxLen, Permission: []any{}})
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.adapters))
	for name := range s.adapters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mod := s.adapters[name]
		parent := mod.BaseModelName
		if parent == "" {
			parent = s.servedNames[0]
		}
		cards = append(cards, modelCard{Model: openaimodels.Model{ID: name, Object: "model", Created: created, OwnedBy: "vllm",
			Root: mod.Path, Parent: &parent}, Permission: []any{}})
	}
	s.mu.Unlock()
	writeJSON(w, map[string]any{"object": "list", "data": cards})
}

type loadAdapterRequest struct {
	Name        string `json:"lora_name"`
	Path        string `json:"lora_path"`
	LoadInplace bool   `json:"load_inplace"`
}

func (s *Server) handleLoadAdapter(w http.ResponseWriter, r *http.Request) {
	req, ok := s.adapterRequest(w, r)
	if !ok {
		return
	}
	if req.Name == "" || req.Path == "" {
		invalidUserInput("Both 'lora_name' and 'lora_path' must be provided.").write(w)
		return
	}
	if _, err := ParseLoRAModules(req.Name + "=" + req.Path); err != nil || slices.Contains(s.servedNames, req.Name) {
		invalidUserInput(fmt.Sprintf("The lora adapter name '%s' is not valid.", req.Name)).write(w)
		return
	}
	s.mu.Lock()
	_, exists := s.adapters[req.Name]
	if exists && !req.LoadInplace {
		s.mu.Unlock()
		invalidUserInput(fmt.Sprintf("The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", req.Name)).write(w)
		return
	}
	s.adapters[req.Name] = LoRAModule{Name: req.Name, Path: req.Path}
	s.mu.Unlock()
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.Name))
}

func (s *Server) handleUnloadAdapter(w http.ResponseWriter, r *http.Request) {
	req, ok := s.adapterRequest(w, r)
	if !ok {
		return
	}
	if req.Name == "" {
		invalidUserInput("'lora_name' needs to be provided to unload a LoRA adapter.").write(w)
		return
	}
	s.mu.Lock()
	_, exists := s.adapters[req.Name]
	delete(s.adapters, req.Name)
	s.mu.Unlock()
	if !exists {
		(&apiError{Status: http.StatusNotFound, Type: "NotFoundError",
			Message: fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name)}).write(w)
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.Name))
}

// adapterRequest reads a load/unload body; LoRA must be enabled.
func (s *Server) adapterRequest(w http.ResponseWriter, r *http.Request) (*loadAdapterRequest, bool) {
	if s.opts.MaxLoras == 0 {
		badRequest("", "LoRA is not enabled; start the simulator with --max-loras").write(w)
		return nil, false
	}
	body, aerr := readBody(w, r)
	if aerr != nil {
		aerr.write(w)
		return nil, false
	}
	var req loadAdapterRequest
	if err := decodeJSON(body, &req); err != nil {
		writeError(w, err)
		return nil, false
	}
	return &req, true
}

func invalidUserInput(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "InvalidUserInput", Message: msg}
}

func writeError(w http.ResponseWriter, err error) {
	var aerr *apiError
	if !errors.As(err, &aerr) {
		aerr = &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: err.Error()}
	}
	aerr.write(w)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, err)
		return
	}
	writeRawJSON(w, body)
}

func writeRawJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s)
}

// handleResetPrefixCache is vLLM's /reset_prefix_cache: cached blocks nobody
// holds are dropped (AllBlocksCleared with KV events on). While requests
// hold blocks nothing changes and the answer is 409, where vLLM logs a
// warning.
func (s *Server) handleResetPrefixCache(w http.ResponseWriter, _ *http.Request) {
	s.rt.mu.Lock()
	ok := s.rt.eng.ResetPrefixCache(max(s.rt.now(), s.rt.eng.Now()))
	s.rt.mu.Unlock()
	if !ok {
		(&apiError{Status: http.StatusConflict, Type: "ConflictError",
			Message: "the prefix cache cannot be reset while requests hold KV blocks"}).write(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleKVBlocks lists the prefix cache's blocks by the integer form of their
// vLLM hash, for tests that hold a subscriber's index to the cache (404 with
// KV events off). Not a vLLM endpoint.
func (s *Server) handleKVBlocks(w http.ResponseWriter, _ *http.Request) {
	if s.kvEvents == nil {
		(&apiError{Status: http.StatusNotFound, Type: "NotFoundError", Message: "KV events are off (--kv-events-config)"}).write(w)
		return
	}
	s.rt.mu.Lock()
	s.rt.advanceLocked(s.rt.now())
	hashes := s.rt.eng.CachedBlockHashes(nil)
	s.rt.mu.Unlock()
	ints := make([]uint64, len(hashes))
	for i, h := range hashes {
		ints[i] = h.Int()
	}
	writeJSON(w, map[string]any{"block_hashes": ints, "next_sequence": s.kvEvents.Sequence()})
}
