package wire

// The global tier: what a hub and its member clusters exchange.
const (
	// GlobalSummaryPath is where a member cluster serves its summary for the
	// hub (JSON, see pkg/globalsummary), behind a bearer token.
	GlobalSummaryPath = "/igw/v1/global-summary"
	// HeaderClientRegion names the region a request comes from, set by the
	// hub's edge; without it the hub replica's own region is the origin.
	HeaderClientRegion = "x-igw-client-region"
	// HeaderGlobalMember names, on a response of the hub's standalone
	// front, the member cluster that answered.
	HeaderGlobalMember = "x-igw-global-member"
	// HeaderAuthorization carries the bearer token of a summary request.
	HeaderAuthorization = "authorization"
)

// Envoy attributes the hub's ext_proc asks for on the response (the
// policy's processingMode.response.attributes), so that a request Envoy
// retried on the fallback is credited to the member that answered it.
const (
	// ExtProcAttributesKey is the key of ProcessingRequest.attributes under
	// which Envoy's ext_proc filter sends the attributes it is configured with.
	ExtProcAttributesKey = "envoy.filters.http.ext_proc"
	// AttributeUpstreamAddress is the answering upstream's "ip:port".
	AttributeUpstreamAddress = "upstream.address"
	// AttributeUpstreamAttempts is how many upstream attempts the request
	// took (the first and each retry).
	AttributeUpstreamAttempts = "upstream.request_attempt_count"
)

// The hub's (igw-global) metric names.
const (
	// GlobalRequests counts the requests the hub routed, by member and
	// outcome (ok, status_5xx, reset, timeout, rejected).
	GlobalRequests = "igw_global_requests_total"
	// GlobalRetries counts requests retried on another member before their first byte.
	GlobalRetries = "igw_global_retries_total"
	// GlobalPickDuration is the time one pick takes.
	GlobalPickDuration = "igw_global_pick_duration_seconds"
	// GlobalFrontOverhead is the standalone front's own time on a request:
	// all of it but the waits for the member's answer.
	GlobalFrontOverhead = "igw_global_front_overhead_seconds"
	// GlobalMemberInRotation is 1 for a member in rotation, else 0.
	GlobalMemberInRotation = "igw_global_member_in_rotation"
	// GlobalMemberWeight is a member's slow-start weight (0..1).
	GlobalMemberWeight = "igw_global_member_weight"
	// GlobalMemberRTT is a member's smoothed round trip.
	GlobalMemberRTT = "igw_global_member_rtt_seconds"
	// GlobalMemberSummaryAge is the age of a member's latest good summary.
	GlobalMemberSummaryAge = "igw_global_member_summary_age_seconds"
	// GlobalStatusPath is where the hub serves its members' state as JSON.
	GlobalStatusPath = "/status"
)
