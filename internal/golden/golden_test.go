package golden

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestDiffShowsEveryChangeWithContext(t *testing.T) {
	want := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	got := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n"
	const expect = `--- want
+++ got
@@ -1,5 +1,5 @@
 a
-b
+B
 c
 d
 e
@@ -11,3 +11,4 @@
 k
 l
 m
+n
`
	if d := Diff("want", "got", want, got); d != expect {
		t.Fatalf("diff:\n%s\nwant:\n%s", d, expect)
	}
	if d := Diff("want", "got", want, want); d != "" {
		t.Fatalf("equal texts: %q", d)
	}
	if d := Diff("w", "g", "a\n", "a"); !strings.Contains(d, "final newline differs") {
		t.Fatalf("a missing final newline is not reported: %q", d)
	}
}

// TestDiffPatchesWantIntoGot applies random diffs back: every hunk must name
// the right lines, and the changes must turn one text into the other.
func TestDiffPatchesWantIntoGot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() []string {
		lines := make([]string, rng.IntN(40))
		for i := range lines {
			lines[i] = strconv.Itoa(rng.IntN(6))
		}
		return lines
	}
	for i := 0; i < 2000; i++ {
		a, b := text(), text()
		want, got := join(a), join(b)
		d := Diff("w", "g", want, got)
		if (d == "") != (want == got) {
			t.Fatalf("case %d: diff %q for %q -> %q", i, d, want, got)
		}
		if d == "" {
			continue
		}
		patched, err := apply(a, d)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, d)
		}
		if join(patched) != got {
			t.Fatalf("case %d: the diff turns %q into %q, want %q\n%s", i, want, join(patched), got, d)
		}
		if removed, added := counts(d); removed+added != len(a)+len(b)-2*lcsLen(a, b) {
			t.Fatalf("case %d: %d removed and %d added lines is not the fewest\n%s", i, removed, added, d)
		}
	}
}

func join(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// apply is a minimal patch: it checks each hunk's context and removed lines.
func apply(a []string, d string) ([]string, error) {
	lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")[2:]
	var out []string
	next := 0 // first line of a not yet copied
	for k := 0; k < len(lines); {
		var os, ol, ns, nl int
		h := lines[k]
		if _, err := fmt.Sscanf(normalize(h), "@@ -%d,%d +%d,%d @@", &os, &ol, &ns, &nl); err != nil {
			return nil, fmt.Errorf("hunk header %q: %v", h, err)
		}
		start := os - 1
		if ol == 0 {
			start = os
		}
		out = append(out, a[next:start]...)
		next = start
		k++
		seenOld, seenNew := 0, 0
		for k < len(lines) && !strings.HasPrefix(lines[k], "@@") {
			l := lines[k]
			switch l[0] {
			case ' ', '-':
				if next >= len(a) || a[next] != l[1:] {
					return nil, fmt.Errorf("line %d of want is not %q", next+1, l[1:])
				}
				next++
				seenOld++
				if l[0] == ' ' {
					out = append(out, l[1:])
					seenNew++
				}
			case '+':
				out = append(out, l[1:])
				seenNew++
			default:
				return nil, fmt.Errorf("line %q", l)
			}
			k++
		}
		if seenOld != ol || seenNew != nl {
			return nil, fmt.Errorf("hunk %q holds %d old and %d new lines", h, seenOld, seenNew)
		}
	}
	return append(out, a[next:]...), nil
}

// normalize writes a one-line side "N" as "N,1".
func normalize(header string) string {
	f := strings.Fields(header)
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f, " ")
}

func counts(d string) (removed, added int) {
	for _, l := range strings.Split(d, "\n")[2:] {
		switch {
		case strings.HasPrefix(l, "-"):
			removed++
		case strings.HasPrefix(l, "+"):
			added++
		}
	}
	return removed, added
}

func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

type recorder struct {
	errors, fatals []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "case.out.yaml")
	var r recorder
	Check(&r, path, []byte("x\n"))
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "-update") {
		t.Fatalf("a missing file: %+v", r)
	}

	*update = true
	r = recorder{}
	Check(&r, path, []byte("x: 1\ny: 2\n"))
	*update = false
	if data, err := os.ReadFile(path); err != nil || string(data) != "x: 1\ny: 2\n" || len(r.errors)+len(r.fatals) != 0 {
		t.Fatalf("-update wrote %q (%v), reported %+v", data, err, r)
	}

	r = recorder{}
	Check(&r, path, []byte("x: 1\ny: 2\n"))
	if len(r.errors)+len(r.fatals) != 0 {
		t.Fatalf("an equal file: %+v", r)
	}
	Check(&r, path, []byte("x: 1\ny: 3\n"))
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "-y: 2\n+y: 3\n") || !strings.Contains(r.errors[0], path) {
		t.Fatalf("a differing file: %+v", r)
	}
}
