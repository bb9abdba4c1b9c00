// Package plugins registers igw's built-in scheduling plugins.
package plugins

import (
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/fairshare"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/kvcacheutilization"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/labelselector"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/load"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/loraaffinity"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/maxscore"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/modelserved"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/predictedlatency"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/prefixcache"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/saturation"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/weightedrandom"
)

// OverViews are the built-in plugins that read nothing but the candidates'
// datastore views, so they serve any tier that fills views (the global
// picker's member clusters too).
var OverViews = map[string]scheduling.Factory{
	load.QueueType:           load.NewQueue,
	kvcacheutilization.Type:  kvcacheutilization.New,
	load.RunningRequestsType: load.NewRunningRequests,
	maxscore.Type:            maxscore.New,
	weightedrandom.Type:      weightedrandom.New,
}

// overEndpoints are the built-in plugins that need what only an endpoint
// picker has (its prefix index, the endpoints' labels, adapters and events).
var overEndpoints = map[string]scheduling.Factory{
	prefixcache.Type:        prefixcache.New,
	loraaffinity.Type:       loraaffinity.New,
	predictedlatency.Type:   predictedlatency.New,
	labelselector.Type:      labelselector.New,
	saturation.Type:         saturation.New,
	modelserved.Type:        modelserved.New,
	preciseprefixcache.Type: preciseprefixcache.New,
	fairshare.Type:          fairshare.New,
}

// NewRegistry returns a registry holding the built-in plugins.
func NewRegistry() *scheduling.Registry { return scheduling.NewRegistry(OverViews, overEndpoints) }
