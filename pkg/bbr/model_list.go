package bbr

import (
	"log/slog"
	"time"

	"github.com/igw-dev/igw/pkg/filewatch"
	"github.com/igw-dev/igw/pkg/openaimodels"
)

// ModelListFileName is the key under which the operator stores the served-model
// list in the router's ConfigMap, beside the adapter mapping.
const ModelListFileName = openaimodels.FileName

// NewModelListFile keeps list, the answer of GET /v1/models, in step with the
// served-model file at path (openaimodels.ParseFile), re-read every interval.
// A file that is missing or invalid keeps the list in use and is logged and
// counted. metrics may be nil.
func NewModelListFile(path string, interval time.Duration, list *openaimodels.Catalog, metrics *Metrics, log *slog.Logger) *filewatch.File {
	fm := metrics.modelList()
	return &filewatch.File{
		Path: path, Interval: interval, What: "model list", Log: log,
		Apply: filewatch.Parsed(openaimodels.ParseFile, func(entries []openaimodels.Entry) {
			list.Set(entries)
			fm.holds(len(entries))
		}),
		OnLoad: func(err error, _ time.Time) { fm.loaded(err) },
	}
}
