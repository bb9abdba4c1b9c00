package bbr

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/openaimodels"
)

// listed is a GET /v1/models answer as a client reads it, each entry as
// "id" or "id<parent"; it fails the test on anything but a 200 OpenAI list.
func listed(t *testing.T, status int, body []byte) []string {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("GET /v1/models: %d %s", status, body)
	}
	var list struct {
		Object *string `json:"object"`
		Data   []struct {
			ID      string          `json:"id"`
			Object  string          `json:"object"`
			Created int64           `json:"created"`
			OwnedBy string          `json:"owned_by"`
			Parent  json.RawMessage `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Object == nil || *list.Object != "list" || list.Data == nil {
		t.Fatalf("not an OpenAI model list (%v): %s", err, body)
	}
	ids := []string{}
	for _, m := range list.Data {
		if m.Object != "model" || m.Created <= 0 || m.OwnedBy != openaimodels.OwnedBy || m.ID == "" {
			t.Fatalf("entry %+v: want object model, a created time, owned_by igw", m)
		}
		var parent *string
		if err := json.Unmarshal(m.Parent, &parent); err != nil {
			t.Fatalf("entry %s: parent %s", m.ID, m.Parent)
		}
		if parent != nil {
			ids = append(ids, m.ID+"<"+*parent)
		} else {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func serveList(t *testing.T, c *openaimodels.Catalog) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	return listed(t, rec.Code, rec.Body.Bytes())
}

func TestModelListFileKeepsTheLastGoodList(t *testing.T) {
	path, write := tempFile(t, ModelListFileName)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	var list openaimodels.Catalog
	var logs bytes.Buffer
	f := NewModelListFile(path, 0, &list, metrics, slog.New(slog.NewTextHandler(&logs, nil)))

	if err := f.Load(); err == nil {
		t.Fatal("a missing file must be an error")
	}
	if _, ok := list.Entries(); ok {
		t.Fatal("a missing file set a list")
	}
	write("models: [{id: qwen3-32b}, {id: sql-lora, parent: qwen3-32b}]")
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	want := []string{"qwen3-32b", "sql-lora<qwen3-32b"}
	if got := serveList(t, &list); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for _, bad := range []string{"models: [{id: a}, {id: a}]", "", "models: [{id: a"} {
		write(bad)
		if err := f.Load(); err == nil {
			t.Fatalf("%q loaded", bad)
		}
		if got := serveList(t, &list); !slices.Equal(got, want) {
			t.Fatalf("after %q the list is %v; want the last good one, %v", bad, got, want)
		}
	}
	if !strings.Contains(logs.String(), "listed twice") || !strings.Contains(logs.String(), "keeping the last good one") {
		t.Fatalf("the reason is not logged: %s", logs.String())
	}
	write("models: [{id: llama}, {id: qwen3-32b}, {id: sql-lora, parent: qwen3-32b}]")
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	if got := serveList(t, &list); !slices.Equal(got, []string{"llama", "qwen3-32b", "sql-lora<qwen3-32b"}) {
		t.Fatalf("after a good file: %v", got)
	}
	checkLoads(t, reg, MetricModelListReloads, 2, 4, "missing, duplicate, empty, broken")
	if got := counter(t, reg, MetricAdapterReloads, map[string]string{"result": ReloadFailed}); got != 0 {
		t.Errorf("model list loads counted as adapter mapping loads (%v)", got)
	}
	if st := f.Status(); !st.Loaded || st.Error != "" {
		t.Errorf("status %+v", st)
	}
}

func TestRunnerServesTheModelList(t *testing.T) {
	cm := testfile.NewConfigMap(t, map[string]string{
		AdapterMappingFileName: "adapters: {sql-lora: qwen3-32b}",
		ModelListFileName:      "models: [{id: qwen3-32b}, {id: sql-lora, parent: qwen3-32b}]",
	})
	o := NewOptions()
	o.AdapterMappingFile, o.ModelListFile = cm.Path(AdapterMappingFileName), cm.Path(ModelListFileName)
	o.AdapterMappingPollInterval = 5 * time.Millisecond
	r := startRunner(t, o)
	base := "http://" + r.Addr("models")
	do := func(method, path string) (int, http.Header, []byte) {
		t.Helper()
		a := servetest.Do(t, nil, servetest.NewRequest(t, method, base+path, `{"model":"qwen3-32b"}`))
		return a.Status, a.Header, a.Body
	}
	models := func() []string {
		status, h, body := do(http.MethodGet, "/v1/models")
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("content type %q", ct)
		}
		return listed(t, status, body)
	}
	if got := models(); !slices.Equal(got, []string{"qwen3-32b", "sql-lora<qwen3-32b"}) {
		t.Fatalf("at start: %v", got)
	}

	cm.Update(map[string]string{
		AdapterMappingFileName: "adapters: {sql-lora: qwen3-32b}",
		ModelListFileName:      "models: [{id: qwen3-32b}, {id: sql-lora, parent: qwen3-32b}, {id: llama}]",
	})
	waitFor(t, "the updated list", func() bool { return slices.Contains(models(), "llama") })
	cm.Update(map[string]string{
		AdapterMappingFileName: "adapters: {sql-lora: qwen3-32b}",
		ModelListFileName:      "models: [{id: llama, parent: llama}]",
	})
	waitFor(t, "the bad list to be reported", func() bool { return r.ModelList.Status().Error != "" })
	if got := models(); !slices.Equal(got, []string{"qwen3-32b", "sql-lora<qwen3-32b", "llama"}) {
		t.Fatalf("a bad file changed the list to %v", got)
	}

	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		status, h, body := do(method, "/v1/models")
		if status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" || !bytes.Contains(body, []byte(`"code":"method_not_allowed"`)) {
			t.Errorf("%s /v1/models: %d Allow %q %s", method, status, h.Get("Allow"), body)
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/metrics", "/v2/models"} {
		if status, _, body := do(http.MethodGet, path); status != http.StatusNotFound || !bytes.Contains(body, []byte(`"code":"unknown_url"`)) {
			t.Errorf("GET %s on the models port: %d %s, want the OpenAI 404", path, status, body)
		}
	}
	// One model: the OpenAI model object, with its parent for an adapter; an
	// unknown id is OpenAI's model_not_found.
	if status, _, body := do(http.MethodGet, "/v1/models/sql-lora"); status != http.StatusOK ||
		!bytes.Contains(body, []byte(`"id":"sql-lora","object":"model"`)) || !bytes.Contains(body, []byte(`"parent":"qwen3-32b"`)) {
		t.Errorf("GET /v1/models/sql-lora: %d %s", status, body)
	}
	if status, _, body := do(http.MethodGet, "/v1/models/gpt-9"); status != http.StatusNotFound || !bytes.Contains(body, []byte(`"code":"model_not_found"`)) {
		t.Errorf("GET /v1/models/gpt-9: %d %s, want the OpenAI 404", status, body)
	}

	metrics := httpGet(t, "http://"+r.Addr("metrics")+"/metrics")
	for _, want := range []string{MetricModelListReloads + `{result="applied"} 2`, MetricModelListReloads + `{result="failed"} 1`, MetricModelListModels + " 3"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var ready struct {
		Detail struct {
			Models    *int `json:"models"`
			ModelList struct {
				Loaded bool   `json:"loaded"`
				Error  string `json:"error"`
			} `json:"modelList"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, "http://"+r.Addr("metrics")+"/readyz")), &ready); err != nil {
		t.Fatal(err)
	}
	if d := ready.Detail; d.Models == nil || *d.Models != 3 || !d.ModelList.Loaded || !strings.Contains(d.ModelList.Error, "its own parent") {
		t.Fatalf("readyz detail %+v", d)
	}
}

func TestRunnerModelListBeforeItsFileAndWithoutOne(t *testing.T) {
	r := startRunner(t, NewOptions())
	if r.ModelList != nil {
		t.Fatal("a watch without --model-list-file")
	}
	a := servetest.Get(t, "http://"+r.Addr("models")+"/v1/models")
	if got := listed(t, a.Status, a.Body); len(got) != 0 {
		t.Fatalf("without a file: %v, want an empty list", got)
	}

	path := filepath.Join(t.TempDir(), ModelListFileName)
	o := NewOptions()
	o.ModelListFile, o.AdapterMappingPollInterval = path, 5*time.Millisecond
	r = startRunner(t, o)
	get := func() (int, []byte) {
		a := servetest.Get(t, "http://"+r.Addr("models")+"/v1/models")
		return a.Status, a.Body
	}
	if status, body := get(); status != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(`"code":"model_list_unavailable"`)) {
		t.Fatalf("before the file exists: %d %s, want 503: an empty list would tell clients nothing is served", status, body)
	}
	if err := os.WriteFile(path, []byte("models: [{id: m}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file to be loaded", func() bool { status, _ := get(); return status == http.StatusOK })
	if status, body := get(); !slices.Equal(listed(t, status, body), []string{"m"}) {
		t.Fatalf("after the file appeared: %s", body)
	}
}
