// Package plugins registers the global picker's plugins: its own, over member
// clusters, and the endpoint picker's that work on members unchanged (queue
// depth, KV use, running requests, the pickers), which read only the
// datastore view a member's summary fills.
package plugins

import (
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/kvcacheutilization"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/maxscore"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/queue"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/runningrequests"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/weightedrandom"
	"github.com/igw-dev/igw/pkg/global/plugins/errorrate"
	"github.com/igw-dev/igw/pkg/global/plugins/headroom"
	"github.com/igw-dev/igw/pkg/global/plugins/memberhealth"
	"github.com/igw-dev/igw/pkg/global/plugins/predictedttft"
	"github.com/igw-dev/igw/pkg/global/plugins/prefixlocality"
	"github.com/igw-dev/igw/pkg/global/plugins/proximity"
	"github.com/igw-dev/igw/pkg/global/plugins/regionpin"
	"github.com/igw-dev/igw/pkg/global/plugins/servesmodel"
)

// Register adds every plugin the global picker can run to r.
func Register(r *scheduling.Registry) {
	r.Register(regionpin.Type, regionpin.New)
	r.Register(memberhealth.Type, memberhealth.New)
	r.Register(servesmodel.Type, servesmodel.New)
	r.Register(predictedttft.Type, predictedttft.New)
	r.Register(prefixlocality.Type, prefixlocality.New)
	r.Register(headroom.Type, headroom.New)
	r.Register(errorrate.Type, errorrate.New)
	r.Register(proximity.Type, proximity.New)
	r.Register(queue.Type, queue.New)
	r.Register(kvcacheutilization.Type, kvcacheutilization.New)
	r.Register(runningrequests.Type, runningrequests.New)
	r.Register(maxscore.Type, maxscore.New)
	r.Register(weightedrandom.Type, weightedrandom.New)
}

// NewRegistry returns a registry holding the global picker's plugins.
func NewRegistry() *scheduling.Registry {
	r := scheduling.NewRegistry()
	Register(r)
	return r
}
