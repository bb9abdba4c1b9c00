package bench

import (
	"maps"
	"slices"
	"strconv"
)

// The codes failed_by_code counts a failed request under, besides the HTTP
// status a client received (429, 500, 503, ...).
const (
	// CodeNoResponse: the connection was refused or reset, or the stream broke
	// off, with no error status; a gateway in front reports it as 502.
	CodeNoResponse = 502
	// CodeClientTimeout: the client gave up waiting (des: no first token
	// within ClientTimeout). 599 is no status a server sends, so it cannot be
	// confused with one.
	CodeClientTimeout = 599
)

// FailedByCode counts failed requests by code: the JSON object
// {"CODE": N} of the benchmark contract. Medians over seeds are taken per
// code; a code missing from a run counts 0 there.
type FailedByCode map[string]float64

func (c FailedByCode) add(code int) { c[strconv.Itoa(code)]++ }

// medianFailedByCode takes the median of each code's count over runs.
func medianFailedByCode(runs []Metrics) FailedByCode {
	out := FailedByCode{}
	codes := map[string]bool{}
	for i := range runs {
		for code := range runs[i].FailedByCode {
			codes[code] = true
		}
	}
	xs := make([]float64, len(runs))
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		for i := range runs {
			xs[i] = runs[i].FailedByCode[code]
		}
		out[code] = Median(xs)
	}
	return out
}
