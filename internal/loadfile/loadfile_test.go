package loadfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("42"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("forty"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := Parse(good, func(b []byte) (int, error) { return strconv.Atoi(string(b)) }); err != nil || v != 42 {
		t.Fatalf("good: %d %v, want 42", v, err)
	}
	_, err := Parse(bad, func(b []byte) (int, error) { return strconv.Atoi(string(b)) })
	if err == nil || !strings.HasPrefix(err.Error(), bad+": ") || !errors.Is(err, strconv.ErrSyntax) {
		t.Fatalf("bad: %v, want the path then the parse error", err)
	}
	_, err = Parse(filepath.Join(dir, "missing"), func(b []byte) (int, error) { return 0, nil })
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v, want not exist", err)
	}
}
