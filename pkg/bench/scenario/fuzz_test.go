package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: any input either fails with an error that names the file or
// yields a scenario that validates; nothing panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(everyKey))
	f.Add([]byte(globalKeys))
	files, _ := filepath.Glob("../../../bench/scenarios/*.yaml")
	heldOut, _ := filepath.Glob("../../../bench/heldout/*.yaml")
	shapes, _ := filepath.Glob("../../../bench/shapes/*.yaml")
	files = append(append(files, heldOut...), shapes...)
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("a: &x [*x]"))
	f.Add([]byte("name: x\nfleet: {}\n"))
	f.Add([]byte("base: &b {replicas: 1.5}\nfleet: [{<<: *b, name: a}]\nwarmup: 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed scenario does not validate: %v", err)
		}
		if len(s.PodConfigs(1)) == 0 {
			t.Fatal("a valid scenario has pods")
		}
	})
}
