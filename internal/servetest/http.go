package servetest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Answer is a whole HTTP answer.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends req with client (http.DefaultClient when nil) and reads the whole
// answer; a request that gets no answer fails t. A body cut short ends where
// it broke, so that tests of cut streams see what arrived.
func Do(t testing.TB, client *http.Client, req *http.Request) Answer {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// Get is Do of a GET of url.
func Get(t testing.TB, url string) Answer {
	t.Helper()
	return Do(t, nil, NewRequest(t, http.MethodGet, url, ""))
}

// Post is Do of a POST of the JSON body to url.
func Post(t testing.TB, url, body string) Answer {
	t.Helper()
	return Do(t, nil, NewRequest(t, http.MethodPost, url, body))
}

// NewRequest is a request of url with a JSON body (none when empty); a bad
// URL fails t.
func NewRequest(t testing.TB, method, url, jsonBody string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(jsonBody))
	if err != nil {
		t.Fatal(err)
	}
	if jsonBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}
