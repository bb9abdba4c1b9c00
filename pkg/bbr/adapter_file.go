package bbr

import (
	"log/slog"
	"time"

	"github.com/igw-dev/igw/pkg/filewatch"
)

// NewAdapterMappingFile keeps r's adapter mapping in step with the mapping file at
// path, re-read every interval (see filewatch for why it polls). A file that is
// missing or invalid keeps the mapping in use and is logged and counted.
// metrics may be nil.
func NewAdapterMappingFile(path string, interval time.Duration, r *Router, metrics *Metrics, log *slog.Logger) *filewatch.File {
	fm := metrics.adapterMapping()
	return &filewatch.File{
		Path: path, Interval: interval, What: "adapter mapping", Log: log,
		Apply: filewatch.Parsed(ParseAdapterMapping, func(adapters map[string]string) {
			r.SetAdapters(adapters)
			fm.holds(len(adapters))
		}),
		OnLoad: func(err error, _ time.Time) { fm.loaded(err) },
	}
}
