// Package plugins registers igw's built-in scheduling plugins.
package plugins

import (
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/kvcacheutilization"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/labelselector"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/loraaffinity"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/maxscore"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/modelserved"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/predictedlatency"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/prefixcache"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/queue"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/runningrequests"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/saturation"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/weightedrandom"
)

// Register adds every built-in plugin to r.
func Register(r *scheduling.Registry) {
	r.Register(queue.Type, queue.New)
	r.Register(kvcacheutilization.Type, kvcacheutilization.New)
	r.Register(runningrequests.Type, runningrequests.New)
	r.Register(prefixcache.Type, prefixcache.New)
	r.Register(loraaffinity.Type, loraaffinity.New)
	r.Register(predictedlatency.Type, predictedlatency.New)
	r.Register(maxscore.Type, maxscore.New)
	r.Register(weightedrandom.Type, weightedrandom.New)
	r.Register(labelselector.Type, labelselector.New)
	r.Register(saturation.Type, saturation.New)
	r.Register(modelserved.Type, modelserved.New)
	r.Register(preciseprefixcache.Type, preciseprefixcache.New)
}

// NewRegistry returns a registry holding the built-in plugins.
func NewRegistry() *scheduling.Registry {
	r := scheduling.NewRegistry()
	Register(r)
	return r
}
