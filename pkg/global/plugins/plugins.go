// Package plugins registers the global picker's plugins: its own, over member
// clusters, and the endpoint picker's that work on members unchanged (queue
// depth, KV use, running requests, the pickers), which read only the
// datastore view a member's summary fills.
package plugins

import (
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	eppplugins "github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/global/plugins/errorrate"
	"github.com/igw-dev/igw/pkg/global/plugins/headroom"
	"github.com/igw-dev/igw/pkg/global/plugins/memberhealth"
	"github.com/igw-dev/igw/pkg/global/plugins/predictedttft"
	"github.com/igw-dev/igw/pkg/global/plugins/prefixlocality"
	"github.com/igw-dev/igw/pkg/global/plugins/proximity"
	"github.com/igw-dev/igw/pkg/global/plugins/regionpin"
	"github.com/igw-dev/igw/pkg/global/plugins/regionshaping"
	"github.com/igw-dev/igw/pkg/global/plugins/servesmodel"
)

// overMembers are the global picker's own plugins.
var overMembers = map[string]scheduling.Factory{
	regionpin.Type:      regionpin.New,
	regionshaping.Type:  regionshaping.New,
	memberhealth.Type:   memberhealth.New,
	servesmodel.Type:    servesmodel.New,
	predictedttft.Type:  predictedttft.New,
	prefixlocality.Type: prefixlocality.New,
	headroom.Type:       headroom.New,
	errorrate.Type:      errorrate.New,
	proximity.Type:      proximity.New,
}

// NewRegistry returns a registry holding the global picker's plugins, and
// the extra sets' (a benchmark's baselines).
func NewRegistry(extra ...map[string]scheduling.Factory) *scheduling.Registry {
	return scheduling.NewRegistry(append([]map[string]scheduling.Factory{eppplugins.OverViews, overMembers}, extra...)...)
}
