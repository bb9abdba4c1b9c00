package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/wire"
)

// ModelLister reads each endpoint's model list (GET /v1/models: the base
// models and the LoRA adapters its server has registered) into the store. The
// list changes only when an adapter is loaded or unloaded, so it is read on its
// own interval, far slower than the metrics; it tells the picker which pods
// can serve an adapter that runs nowhere yet. A failed read keeps the previous
// list.
type ModelLister struct {
	Poll // its Path is wire.ModelsPath when empty, its MaxBodyBytes 4 MiB
}

// Run reads every endpoint's list every interval until ctx ends.
func (l *ModelLister) Run(ctx context.Context) error { return l.run(ctx, "model list", l.ReadOnce) }

// ReadOnce reads st's model list and stores it, stamped with the time the
// read started; on failure the stored list stays as it was.
func (l *ModelLister) ReadOnce(ctx context.Context, st *datastore.EndpointState) error {
	return l.observed(st.Key(), func(start time.Time) error {
		g := l.getter(wire.ModelsPath, 4<<20)
		var names []string
		if err := g.get(ctx, st.Key(), func(body io.Reader) (err error) {
			names, err = ParseModels(body)
			return err
		}); err != nil {
			return err
		}
		l.Store.SetServedModels(st.Key(), datastore.NewServedModels(names, start))
		return nil
	})
}

// modelList is the part of an OpenAI model list the picker reads. Pointers
// tell a missing field from an empty one.
type modelList struct {
	Data *[]*struct {
		ID *string `json:"id"`
	} `json:"data"`
}

// ParseModels reads an OpenAI model list ({"object": "list", "data": [{"id":
// NAME, ...}, ...]}, as vLLM, SGLang and trtllm-serve answer GET /v1/models)
// and returns the names in the order listed. Other fields (vLLM's "parent" of
// an adapter, "root", "max_model_len") are ignored. A document that is not
// such a list, or has an entry without a name, is an error as a whole: a list
// read in part would make the picker believe a server lacks a model it has.
func ParseModels(r io.Reader) ([]string, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var list modelList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	if list.Data == nil {
		return nil, errors.New("model list: no \"data\" array")
	}
	names := make([]string, 0, len(*list.Data))
	for i, entry := range *list.Data {
		if entry == nil || entry.ID == nil || *entry.ID == "" {
			return nil, fmt.Errorf("model list: data[%d] has no \"id\"", i)
		}
		names = append(names, *entry.ID)
	}
	return names, nil
}
