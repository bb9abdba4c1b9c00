// Package apierror is the one typed error that igw's HTTP-facing components
// (BBR, EPP, the standalone gateway) return to clients. It renders the OpenAI
// error shape so that unchanged OpenAI SDKs surface the message to the user.
package apierror

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is an OpenAI-style API error with the HTTP status it is sent with.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfterSeconds, when positive, is sent as the Retry-After header.
	RetryAfterSeconds int
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

type body struct {
	Error bodyError `json:"error"`
}

type bodyError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// JSON returns the body clients receive: {"error":{"message","type","param","code"}}.
func (e *Error) JSON() []byte {
	b := body{Error: bodyError{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	out, _ := json.Marshal(b) // cannot fail: only strings
	return out
}

// Write sends the error on an http.ResponseWriter.
func (e *Error) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	if e.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfterSeconds))
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.JSON())
}

func newf(status int, typ, code, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 for a body the server cannot use.
func BadRequest(code, format string, args ...any) *Error {
	return newf(http.StatusBadRequest, "invalid_request_error", code, format, args...)
}

// ModelNotFound is the 404 OpenAI returns for an unknown model.
func ModelNotFound(model string) *Error {
	e := newf(http.StatusNotFound, "invalid_request_error", "model_not_found",
		"The model `%s` does not exist or you do not have access to it.", model)
	e.Param = "model"
	return e
}

// UnknownURL is the 404 OpenAI sends for a path it does not serve; hint says
// what is served.
func UnknownURL(method, path, hint string) *Error {
	return newf(http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: %s %s. %s", method, path, hint)
}

// MethodNotAllowed is a 405 for a method the path does not take; the caller
// sets the Allow header.
func MethodNotAllowed(method, path string) *Error {
	return newf(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
		"Method %s is not allowed on %s.", method, path)
}

// TooLarge is a 413 for a body over the configured limit.
func TooLarge(limit int64) *Error {
	return newf(http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
		"Request body exceeds the limit of %d bytes; send a smaller prompt or raise the gateway's maxRequestBodyBytes.", limit)
}

// Unavailable is a 503: no endpoint can take the request now.
func Unavailable(format string, args ...any) *Error {
	return newf(http.StatusServiceUnavailable, "server_error", "no_healthy_upstream", format, args...)
}

// RateLimited is a 429 with Retry-After: the fleet is saturated and the request was shed.
func RateLimited(retryAfterSeconds int, format string, args ...any) *Error {
	e := newf(http.StatusTooManyRequests, "rate_limit_exceeded", "fleet_saturated", format, args...)
	e.RetryAfterSeconds = retryAfterSeconds
	return e
}

// Internal is a 500 for a fault of the server itself.
func Internal(format string, args ...any) *Error {
	return newf(http.StatusInternalServerError, "server_error", "internal_error", format, args...)
}

// Routes wraps mux so that the answers ServeMux writes itself, a 404 for a
// path no pattern matches and a 405 for a method the path's patterns do not
// take (with their Allow header), are OpenAI errors rather than plain text.
// served, appended to the 404's message, says what the server serves.
func Routes(mux *http.ServeMux, served string) http.Handler {
	return RoutesWriting(mux, served, func(w http.ResponseWriter, e *Error) { e.Write(w) })
}

// RoutesWriting is Routes for a server that writes errors in its own shape
// (the simulator's vLLM errors): write sends e.
func RoutesWriting(mux *http.ServeMux, served string, write func(w http.ResponseWriter, e *Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&muxAnswer{ResponseWriter: w, r: r, served: served, write: write}, r)
	})
}

// muxAnswer replaces the plain-text 404 and 405 ServeMux writes when no
// pattern matches; other answers (a redirect to the clean path) pass.
type muxAnswer struct {
	http.ResponseWriter
	r        *http.Request
	served   string
	write    func(http.ResponseWriter, *Error)
	replaced bool
}

func (m *muxAnswer) WriteHeader(status int) {
	switch status {
	case http.StatusNotFound:
		m.replaced = true
		m.write(m.ResponseWriter, UnknownURL(m.r.Method, m.r.URL.Path, m.served))
	case http.StatusMethodNotAllowed:
		m.replaced = true
		m.write(m.ResponseWriter, MethodNotAllowed(m.r.Method, m.r.URL.Path))
	default:
		m.ResponseWriter.WriteHeader(status)
	}
}

func (m *muxAnswer) Write(b []byte) (int, error) {
	if m.replaced {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}
