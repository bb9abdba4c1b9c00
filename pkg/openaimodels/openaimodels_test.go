package openaimodels

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFileRoundTripsAndRefusesBrokenFiles(t *testing.T) {
	entries := []Entry{{ID: "qwen3-32b"}, {ID: "meta-llama/Llama-3.1-8B-Instruct"}, {ID: "qwen3-32b-sql", Parent: "qwen3-32b"}}
	data, err := MarshalFile(entries)
	if err != nil {
		t.Fatal(err)
	}
	want := "models:\n- id: qwen3-32b\n- id: meta-llama/Llama-3.1-8B-Instruct\n- id: qwen3-32b-sql\n  parent: qwen3-32b\n"
	if string(data) != want {
		t.Fatalf("file\n%s\nwant\n%s", data, want)
	}
	got, err := ParseFile(data)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("parsed %+v %v, want the entries in their order", got, err)
	}
	if data, err := MarshalFile(nil); err != nil || string(data) != "models: []\n" {
		t.Fatalf("no models: %q %v", data, err)
	}
	if got, err := ParseFile([]byte("models: []")); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("an empty list: %v %v", got, err)
	}
	for bad, reason := range map[string]string{
		"":                                     "empty",
		"  \n":                                 "empty",
		"adapters: {}":                         "unknown field",
		"models: [{id: a, owner: x}]":          "unknown field",
		"other: 1\nmodels: []":                 "unknown field",
		"{}":                                   `no "models"`,
		"models: [{parent: a}]":                "no id",
		"models: [{id: a}, {id: a}]":           "listed twice",
		"models: [{id: a, parent: a}]":         "its own parent",
		"models: [{id: a}\n":                   "yaml",
		"models: {a: b}":                       "cannot unmarshal",
		"models: [{id: a}]\nmodels: [{id: b}]": "already set",
	} {
		if _, err := ParseFile([]byte(bad)); err == nil || !strings.Contains(strings.ToLower(err.Error()), reason) {
			t.Errorf("%q: error %v, want one that says %q", bad, err, reason)
		}
	}
	if _, err := MarshalFile([]Entry{{ID: "a"}, {ID: "a"}}); err == nil {
		t.Error("MarshalFile wrote a file ParseFile refuses")
	}
}

// served decodes a GET /v1/models answer as a client does.
func served(t *testing.T, h http.Handler) (List, *http.Response) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	resp := rec.Result()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, rec.Body, err)
	}
	var l List
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l, resp
}

func TestCatalogServesTheOpenAIListShape(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	c := &Catalog{Now: func() time.Time { return clock }}
	c.Set([]Entry{{ID: "qwen3-32b"}, {ID: "qwen3-32b-sql", Parent: "qwen3-32b"}})

	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	want := `{"object":"list","data":[` +
		`{"id":"qwen3-32b","object":"model","created":1700000000,"owned_by":"igw","root":"qwen3-32b","parent":null},` +
		`{"id":"qwen3-32b-sql","object":"model","created":1700000000,"owned_by":"igw","root":"qwen3-32b-sql","parent":"qwen3-32b"}]}`
	if rec.Body.String() != want {
		t.Fatalf("body\n%s\nwant\n%s", rec.Body, want)
	}

	// A later list keeps the created time of the models it still holds; new ones are created now.
	clock = clock.Add(time.Hour)
	c.Set([]Entry{{ID: "qwen3-32b-sql", Parent: "qwen3-32b"}, {ID: "llama"}})
	l, _ := served(t, c)
	got := map[string]int64{}
	for _, m := range l.Data {
		got[m.ID] = m.Created
	}
	if !reflect.DeepEqual(got, map[string]int64{"qwen3-32b-sql": 1_700_000_000, "llama": 1_700_003_600}) {
		t.Fatalf("created %v, want the first list's time for qwen3-32b-sql and the second's for llama", got)
	}
	clock = clock.Add(time.Hour)
	c.Set([]Entry{{ID: "qwen3-32b"}})
	c.Set([]Entry{{ID: "qwen3-32b"}, {ID: "llama"}})
	if l, _ := served(t, c); l.Data[1].ID != "llama" || l.Data[1].Created != 1_700_007_200 {
		t.Fatalf("a model dropped and listed again must be created anew: %+v", l.Data)
	}
	if e, ok := c.Entries(); !ok || !reflect.DeepEqual(e, []Entry{{ID: "qwen3-32b"}, {ID: "llama"}}) {
		t.Fatalf("entries %v %v", e, ok)
	}

	c.Set(nil)
	rec = httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Body.String() != `{"object":"list","data":[]}` {
		t.Fatalf("no models: %s (data must be an empty array, not null)", rec.Body)
	}
}

func TestCatalogRefusesOtherMethodsAndAnswersHEAD(t *testing.T) {
	c := &Catalog{}
	c.Set([]Entry{{ID: "m"}})
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(method, "/v1/models", strings.NewReader(`{"model":"m"}`)))
		var e struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s: %s: %v", method, rec.Body, err)
		}
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" ||
			e.Error.Code != "method_not_allowed" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, method) {
			t.Errorf("%s: %d Allow %q %+v; want 405, Allow: GET, HEAD and an OpenAI error naming the method", method, rec.Code, rec.Header().Get("Allow"), e)
		}
	}
	get := httptest.NewRecorder()
	c.ServeHTTP(get, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/v1/models", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != fmt.Sprint(get.Body.Len()) {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q; want 200, none, the GET body's length", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestCatalogBeforeTheFirstListIsUnavailable(t *testing.T) {
	c := &Catalog{}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"code":"model_list_unavailable"`) || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, rec.Header())
	}
	if _, ok := c.Entries(); ok {
		t.Fatal("Entries says a list is in use before Set")
	}
}

func TestCatalogServesEachModel(t *testing.T) {
	var c Catalog
	c.Now = func() time.Time { return time.Unix(1700000000, 0) }
	c.Set([]Entry{{ID: "meta-llama/Llama-3.1-8B"}, {ID: "sql-lora", Parent: "meta-llama/Llama-3.1-8B"}})
	mux := http.NewServeMux()
	c.Mount(mux)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/models/sql-lora", 200, `{"id":"sql-lora","object":"model","created":1700000000,"owned_by":"igw","root":"sql-lora","parent":"meta-llama/Llama-3.1-8B"}`},
		// Clients send a slash in an id as it is (openai-go) or escaped (the openai npm package).
		{"/v1/models/meta-llama/Llama-3.1-8B", 200, `{"id":"meta-llama/Llama-3.1-8B","object":"model","created":1700000000,"owned_by":"igw","root":"meta-llama/Llama-3.1-8B","parent":null}`},
		{"/v1/models/meta-llama%2FLlama-3.1-8B", 200, `"id":"meta-llama/Llama-3.1-8B"`},
		{"/v1/models/gpt-9", 404, `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"/v1/models/", 200, `"object":"list"`},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s %q, want %d with %s", tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.status, tc.want)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/v1/models/sql-lora", nil))
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), `"code":"method_not_allowed"`) {
		t.Errorf("DELETE: %d %q", rec.Code, rec.Body)
	}
}
