package globalsummary

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/igw-dev/igw/pkg/filewatch"
	"github.com/igw-dev/igw/pkg/wire"
)

// MinTokenLength is the shortest bearer token a token file may hold.
const MinTokenLength = 16

// TokenFile holds the bearer tokens a summary request may present, read from a
// file mounted from a Secret: one token a line (blank lines and lines starting
// with # are skipped; several lines let a token be rotated without a gap). The
// file is re-read while Run runs; a file that goes missing or becomes invalid
// keeps the tokens last in effect. Before any valid file every request is refused.
type TokenFile struct {
	file   filewatch.File
	hashes atomic.Pointer[[][sha256.Size]byte]
}

// NewTokenFile reads path once; the error says why its tokens are not in effect.
func NewTokenFile(path string, log *slog.Logger) (*TokenFile, error) {
	t := &TokenFile{}
	t.file = filewatch.File{Path: path, What: "summary token file", Log: log, Apply: t.apply}
	return t, t.file.Load()
}

// Run re-reads the file until ctx ends.
func (t *TokenFile) Run(ctx context.Context) { t.file.Run(ctx) }

// Status says which version of the file is in effect, or why none is.
func (t *TokenFile) Status() filewatch.Status { return t.file.Status() }

func (t *TokenFile) apply(data []byte) error {
	tokens, err := ParseTokens(data)
	if err != nil {
		return err
	}
	hashes := make([][sha256.Size]byte, len(tokens))
	for i, tok := range tokens {
		hashes[i] = sha256.Sum256([]byte(tok))
	}
	t.hashes.Store(&hashes)
	return nil
}

// ParseTokens reads a token file's content.
func ParseTokens(data []byte) ([]string, error) {
	var tokens []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		tok := strings.TrimSpace(sc.Text())
		if tok == "" || strings.HasPrefix(tok, "#") {
			continue
		}
		if strings.ContainsAny(tok, " \t") {
			return nil, fmt.Errorf("line %d holds more than one word; put one token a line", line)
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("the token on line %d is %d characters long; use at least %d (for example: openssl rand -hex 32)", line, len(tok), MinTokenLength)
		}
		tokens = append(tokens, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("no token in the file")
	}
	return tokens, nil
}

// Authenticate checks the request's bearer token against every token in
// effect, in constant time (hashes of equal length are compared, so neither
// content nor length leaks through timing).
func (t *TokenFile) Authenticate(r *http.Request) error {
	hashes := t.hashes.Load()
	if hashes == nil {
		return fmt.Errorf("this member has no summary token in effect (%s)", t.file.Status().Error)
	}
	auth := r.Header.Get(wire.HeaderAuthorization)
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return fmt.Errorf("a bearer token is required (Authorization: Bearer <token>)")
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, h := range *hashes {
		match |= subtle.ConstantTimeCompare(got[:], h[:])
	}
	if match != 1 {
		return fmt.Errorf("the bearer token is not valid")
	}
	return nil
}
