package version

import (
	"os"
	"regexp"
	"testing"
)

// TestDefaultIsTheRelease holds the places that name the release to Default:
// a release bump that forgets one of them would ship images whose tags differ
// from the operator's defaults.
func TestDefaultIsTheRelease(t *testing.T) {
	for _, c := range []struct{ file, pattern string }{
		{"../../Makefile", `(?m)^VERSION \?= (\S+)$`},
		{"../../Dockerfile", `(?m)^ARG VERSION=(\S+)$`},
		{"../../charts/igw/Chart.yaml", `(?m)^appVersion: "?([^"\s]+)"?$`},
	} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(c.pattern).FindSubmatch(data)
		if m == nil {
			t.Errorf("%s: no line matches %s", c.file, c.pattern)
			continue
		}
		if got := string(m[1]); got != Default {
			t.Errorf("%s names %s, version.Default is %s: keep them equal", c.file, got, Default)
		}
	}
}

func TestString(t *testing.T) {
	if got := String("epp"); !regexp.MustCompile(`^epp ` + regexp.QuoteMeta(Version) + ` \(go.+\)$`).MatchString(got) {
		t.Errorf("String = %q", got)
	}
}
