package scheduling

import (
	"net/http"
	"strings"
)

// HeadersOf is an HTTP request's headers as Request.Headers holds them:
// lower-case names, each with its first value.
func HeadersOf(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[strings.ToLower(k)] = v[0]
		}
	}
	return out
}
