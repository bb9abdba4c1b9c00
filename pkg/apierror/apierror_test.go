package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRoutes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	// A handler's own 404 is its answer, not the mux's.
	mux.HandleFunc("GET /v1/models/{id}", func(w http.ResponseWriter, r *http.Request) { ModelNotFound(r.PathValue("id")).Write(w) })
	mux.HandleFunc("GET /dir/", func(w http.ResponseWriter, _ *http.Request) {})
	h := Routes(mux, "Served: POST /v1/chat/completions.")
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
		message      string
	}{
		{"POST", "/v1/chat/completions", 200, "", "", ""},
		{"GET", "/v1/chat/completions", 405, "method_not_allowed", "POST", "Method GET is not allowed on /v1/chat/completions."},
		{"POST", "/v1/nothing", 404, "unknown_url", "", "Unknown request URL: POST /v1/nothing. Served: POST /v1/chat/completions."},
		{"GET", "/v1/models/m1", 404, "model_not_found", "", "The model `m1` does not exist or you do not have access to it."},
		{"GET", "/dir", 307, "", "", ""}, // ServeMux's redirect to the subtree passes
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.status)
			continue
		}
		if tc.code == "" {
			continue
		}
		var body struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    string  `json:"code"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %q (%s) is not an OpenAI error: %v", tc.method, tc.path, rec.Body, rec.Header().Get("Content-Type"), err)
			continue
		}
		if body.Error.Code != tc.code || body.Error.Type != "invalid_request_error" || body.Error.Message != tc.message {
			t.Errorf("%s %s: error %+v, want code %s, message %q", tc.method, tc.path, body.Error, tc.code, tc.message)
		}
		if got := rec.Header().Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}
