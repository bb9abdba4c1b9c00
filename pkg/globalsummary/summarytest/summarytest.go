// Package summarytest checks a server's member summary (GET
// wire.GlobalSummaryPath) as the global tier's hub reads it, for the tests
// of the servers that export one (the picker, the standalone gateway).
package summarytest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

// RefusesWithoutToken fails t unless a GET of url without a bearer token
// gets 401.
func RefusesWithoutToken(t testing.TB, url string) {
	t.Helper()
	if a := servetest.Get(t, url); a.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s, want 401", a.Status, a.Body)
	}
}

// WaitForModel fetches the summary at url with a token of tokenFile until
// ready holds for model's entry, within timeout, and returns the entry. A
// failed fetch, or a summary that names another cluster or region, fails t.
func WaitForModel(t testing.TB, url, tokenFile, cluster, region, model string, timeout time.Duration, ready func(*globalsummary.Model) bool) *globalsummary.Model {
	t.Helper()
	client := &globalsummary.Client{TokenFile: tokenFile}
	var m *globalsummary.Model
	servetest.WaitFor(t, "a summary whose "+model+" is ready", timeout, func() bool {
		s, err := client.Fetch(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		if s.Cluster != cluster || s.Region != region {
			t.Fatalf("summary names cluster %q in region %q, want %q in %q", s.Cluster, s.Region, cluster, region)
		}
		m = s.Find(model)
		return m != nil && ready(m)
	})
	return m
}
