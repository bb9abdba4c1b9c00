package filewatch

import (
	"errors"
	"strings"
	"testing"
)

type namesFile struct {
	Names []string `json:"names"`
}

func parseNames(data string) ([]string, error) {
	return StrictYAML([]byte(data), `"names: []" for none`, `"names" list`,
		func(f namesFile) ([]string, bool) { return f.Names, f.Names != nil },
		func(names []string) error {
			if len(names) > 2 {
				return errors.New("too many names")
			}
			return nil
		})
}

// A good file gives its key's value; each kind of bad file is refused with a
// message saying what is wrong.
func TestStrictYAML(t *testing.T) {
	if got, err := parseNames("names: [a, b]"); err != nil || len(got) != 2 {
		t.Fatalf("good file: %v %v", got, err)
	}
	if got, err := parseNames("names: []"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty on purpose: %v %v", got, err)
	}
	for data, want := range map[string]string{
		" \n":                  `the file is empty (write "names: []" for none)`,
		"other: 1":             "unknown field",
		"{}":                   `the file has no "names" list`,
		"names: [a, b, c]":     "too many names",
		"names: [a]\nextra: 1": "unknown field",
	} {
		if _, err := parseNames(data); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", data, err, want)
		}
	}
}
