// Package openaimodels is the OpenAI model list (GET /v1/models, and GET
// /v1/models/{id} for one) as igw's
// gateways answer it: the shape vLLM and the OpenAI API send, the served-model
// file the operator renders for the body-based router, and a handler that
// serves the list and can be given a new one at any time.
//
// The standalone gateway (pkg/gateway) and the body-based router (pkg/bbr)
// serve the list with Catalog; the simulator (pkg/sim) sends the same Model
// entries with vLLM's extra fields.
package openaimodels

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/clock"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/filewatch"
	"github.com/igw-dev/igw/pkg/wire"
)

// OwnedBy is the owned_by of every model an igw gateway lists.
const OwnedBy = "igw"

// Model is one entry of an OpenAI model list. Root and Parent are vLLM's:
// an adapter names its base model as Parent; a base model sends parent null.
type Model struct {
	ID      string  `json:"id"`
	Object  string  `json:"object"`
	Created int64   `json:"created"`
	OwnedBy string  `json:"owned_by"`
	Root    string  `json:"root"`
	Parent  *string `json:"parent"`
}

// List is the body of GET /v1/models: {"object": "list", "data": [...]}.
type List struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Entry is one name a gateway serves: a model, or a LoRA adapter with the
// model it applies to as Parent.
type Entry struct {
	ID     string `json:"id"`
	Parent string `json:"parent,omitempty"`
}

// Model is the entry as a gateway lists it, created at the given Unix time.
func (e Entry) Model(created int64) Model {
	m := Model{ID: e.ID, Object: "model", Created: created, OwnedBy: OwnedBy, Root: e.ID}
	if e.Parent != "" {
		parent := e.Parent
		m.Parent = &parent
	}
	return m
}

// FileName is the key of the served-model file in the body-based router's
// ConfigMap, and so its name in the mounted directory.
const FileName = "models.yaml"

// file is the served-model file:
//
//	models:
//	- id: qwen3-32b
//	- id: qwen3-32b-sql
//	  parent: qwen3-32b
type file struct {
	Models []Entry `json:"models"`
}

// MarshalFile writes the served-model file for entries, in their order
// ("models: []" for none). Entries that ParseFile would refuse are an error.
func MarshalFile(entries []Entry) ([]byte, error) {
	if entries == nil {
		entries = []Entry{}
	}
	if err := validate(entries); err != nil {
		return nil, err
	}
	return yaml.Marshal(file{Models: entries})
}

// ParseFile reads the served-model file. Unknown fields, an entry without an
// id, an id listed twice and an adapter that is its own parent are errors, so
// a broken file is noticed instead of listing wrong models. An empty file is
// an error too: a file caught half-written must not empty the list; an
// intentionally empty list is written as "models: []".
func ParseFile(data []byte) ([]Entry, error) {
	return filewatch.StrictYAML(data, `"models: []" for no models`, `"models" list`,
		func(f file) ([]Entry, bool) { return f.Models, f.Models != nil }, validate)
}

func validate(entries []Entry) error {
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		switch {
		case e.ID == "":
			return fmt.Errorf("models[%d] has no id", i)
		case seen[e.ID]:
			return fmt.Errorf("model %q is listed twice", e.ID)
		case e.Parent == e.ID:
			return fmt.Errorf("model %q is its own parent", e.ID)
		}
		seen[e.ID] = true
	}
	return nil
}

// Catalog answers GET /v1/models with the entries last given to Set. It is
// safe for concurrent use. Each model's created time is when the catalog
// first listed it, kept while later lists still hold it; a model dropped and
// listed again is new.
type Catalog struct {
	// Now is the wall clock (time.Now when nil).
	Now func() time.Time

	mu      sync.RWMutex
	set     bool
	entries []Entry
	created map[string]int64
	body    []byte
	byID    map[string][]byte // each model's object, for GET /v1/models/{id}
}

// Set replaces the list.
func (c *Catalog) Set(entries []Entry) {
	at := clock.Now(c.Now).Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	created := make(map[string]int64, len(entries))
	byID := make(map[string][]byte, len(entries))
	list := List{Object: "list", Data: make([]Model, 0, len(entries))}
	for _, e := range entries {
		t, ok := c.created[e.ID]
		if !ok {
			t = at
		}
		created[e.ID] = t
		m := e.Model(t)
		list.Data = append(list.Data, m)
		byID[e.ID], _ = json.Marshal(m) // cannot fail: strings and numbers
	}
	body, _ := json.Marshal(list)
	c.set, c.entries, c.created, c.body, c.byID = true, append([]Entry(nil), entries...), created, body, byID
}

// Mount serves the catalog on mux: the list at /v1/models and each model at
// /v1/models/{id} (an id may hold slashes, as Hugging Face names do).
func (c *Catalog) Mount(mux *http.ServeMux) {
	mux.Handle(wire.ModelsPath, c)
	mux.Handle(wire.ModelsPath+"/", c)
}

// Entries returns the list in use; ok is false until Set was called.
func (c *Catalog) Entries() (entries []Entry, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]Entry(nil), c.entries...), c.set
}

// ServeHTTP answers GET and HEAD with the list (application/json) at
// /v1/models, with the model object at /v1/models/{id} or OpenAI's 404 for an
// id not listed, any other method with an OpenAI-style 405, and, before the
// first Set, a 503.
func (c *Catalog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apierror.MethodNotAllowed(r.Method, r.URL.Path).Write(w)
		return
	}
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, wire.ModelsPath), "/")
	c.mu.RLock()
	body, set := c.body, c.set
	model, listed := c.byID[id]
	c.mu.RUnlock()
	if id != "" {
		body = model
	}
	if !set {
		e := apierror.Unavailable("The model list is not loaded yet; retry shortly.")
		e.Code, e.RetryAfterSeconds = "model_list_unavailable", 1
		e.Write(w)
		return
	}
	if id != "" && !listed {
		apierror.ModelNotFound(id).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}
