package bbr

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/pkg/filewatch"
)

// AdapterMappingFileName is the key under which the operator stores the mapping in
// its ConfigMap, and so the file name in the mounted directory.
const AdapterMappingFileName = "adapters.yaml"

// AdapterMapping is the adapter mapping file the operator renders: each LoRA adapter
// name (as clients send it in "model") and the base model it runs on.
//
//	adapters:
//	  sql-lora: meta-llama/Llama-3.1-8B-Instruct
//	  pirate: openai/gpt-oss-20b
type AdapterMapping struct {
	Adapters map[string]string `json:"adapters"`
}

// MarshalAdapterMapping renders the file for adapters (keys sorted, so the output is
// stable and a ConfigMap is only rewritten when the mapping changes).
func MarshalAdapterMapping(adapters map[string]string) ([]byte, error) {
	if adapters == nil {
		adapters = map[string]string{}
	}
	if err := validateAdapters(adapters); err != nil {
		return nil, err
	}
	return yaml.Marshal(AdapterMapping{Adapters: adapters})
}

// ParseAdapterMapping reads the file. Unknown fields and bad entries are errors, so
// a broken render is noticed instead of silently routing wrong. An empty file is an
// error too: a file caught half-written must not wipe the mapping; an intentionally
// empty mapping is written as "adapters: {}".
func ParseAdapterMapping(data []byte) (map[string]string, error) {
	return filewatch.StrictYAML(data, `"adapters: {}" for no adapters`, `"adapters" map`,
		func(m AdapterMapping) (map[string]string, bool) { return m.Adapters, m.Adapters != nil }, validateAdapters)
}

func validateAdapters(adapters map[string]string) error {
	for adapter, base := range adapters {
		for _, name := range []string{adapter, base} {
			if name == "" {
				return fmt.Errorf("adapter %q: names must not be empty", adapter)
			}
			if e := checkModelName(name); e != nil {
				return fmt.Errorf("adapter %q: %s", adapter, e.Message)
			}
		}
		if adapter == base {
			return fmt.Errorf("adapter %q is mapped to itself", adapter)
		}
	}
	return nil
}
