package globalsummary

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/igw-dev/igw/pkg/wire"
)

// Client fetches members' summaries for the hub.
type Client struct {
	// HTTP sends the requests (http.DefaultClient when nil); its transport
	// carries the TLS settings towards the members.
	HTTP *http.Client
	// TokenFile holds the bearer token (its first token line), mounted from
	// the Secret the hub's CR names. It is read at every fetch, so a rotated
	// Secret takes effect at the next poll.
	TokenFile string
}

// FetchError is a failed fetch; Garbage tells a member that answered with
// something that is not a valid summary from one that did not answer.
type FetchError struct {
	URL     string
	Garbage bool
	Err     error
}

func (e *FetchError) Error() string { return fmt.Sprintf("fetch %s: %v", e.URL, e.Err) }
func (e *FetchError) Unwrap() error { return e.Err }

// Fetch GETs url and decodes the document strictly. ctx bounds the whole
// exchange (the hub's probe timeout).
func (c *Client) Fetch(ctx context.Context, url string) (*Summary, error) {
	fail := func(garbage bool, format string, args ...any) error {
		return &FetchError{URL: url, Garbage: garbage, Err: fmt.Errorf(format, args...)}
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, fail(false, "read the token: %v", err)
	}
	tokens, err := ParseTokens(data)
	if err != nil {
		return nil, fail(false, "token file %s: %v", c.TokenFile, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fail(false, "%v", err)
	}
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+tokens[0])
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fail(false, "%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, fail(false, "read the body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fail(false, "status %d: %s", resp.StatusCode, snippet(body))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fail(true, "content type %q, want application/json", ct)
	}
	s, err := Decode(body)
	if err != nil {
		return nil, fail(true, "%v", err)
	}
	return s, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
