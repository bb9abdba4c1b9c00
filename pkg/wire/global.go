package wire

// The global tier: what a hub and its member clusters exchange.
const (
	// GlobalSummaryPath is where a member cluster serves its summary for the
	// hub (JSON, see pkg/globalsummary), behind a bearer token.
	GlobalSummaryPath = "/igw/v1/global-summary"
	// HeaderClientRegion names the region a request comes from, set by the
	// hub's edge; without it the hub replica's own region is the origin.
	HeaderClientRegion = "x-igw-client-region"
	// HeaderAuthorization carries the bearer token of a summary request.
	HeaderAuthorization = "authorization"
)
