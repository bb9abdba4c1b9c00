package golden

import (
	"fmt"
	"strings"
)

// context is how many unchanged lines a hunk shows around its changes.
const context = 3

// maxCells bounds the longest-common-subsequence table; past it the differing
// middle of the two texts is shown as removed and added whole.
const maxCells = 1 << 24

type edit struct {
	op   byte // ' ', '-' or '+'
	line string
}

// Diff is a unified diff from want (named from) to got (named to), "" when they are equal.
func Diff(from, to, want, got string) string {
	if want == got {
		return ""
	}
	a, b := splitLines(want), splitLines(got)
	edits := lineEdits(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", from, to)
	changed := false
	for _, h := range hunks(edits) {
		changed = true
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", span(h.oldStart, h.oldLen), span(h.newStart, h.newLen))
		for _, e := range edits[h.first:h.last] {
			out.WriteByte(e.op)
			out.WriteString(e.line)
			out.WriteByte('\n')
		}
	}
	if w, g := endsInNewline(want), endsInNewline(got); !changed || w != g {
		fmt.Fprintf(&out, "(the final newline differs: want %t, got %t)\n", w, g)
	}
	return out.String()
}

// endsInNewline is whether the last line ends in a newline (an empty text has none to end).
func endsInNewline(s string) bool { return s == "" || strings.HasSuffix(s, "\n") }

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineEdits turns a into b with the fewest removed and added lines.
func lineEdits(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var edits []edit
	for _, l := range a[:pre] {
		edits = append(edits, edit{' ', l})
	}
	edits = append(edits, middleEdits(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		edits = append(edits, edit{' ', l})
	}
	return edits
}

// middleEdits is the edit script of a longest common subsequence of a and b.
func middleEdits(a, b []string) []edit {
	n, m := len(a), len(b)
	var edits []edit
	if (n+1)*(m+1) > maxCells {
		for _, l := range a {
			edits = append(edits, edit{'-', l})
		}
		for _, l := range b {
			edits = append(edits, edit{'+', l})
		}
		return edits
	}
	// lcs[i][j] is the length of a longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			edits = append(edits, edit{' ', a[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			edits = append(edits, edit{'-', a[i]})
			i++
		default:
			edits = append(edits, edit{'+', b[j]})
			j++
		}
	}
	return edits
}

type hunk struct {
	first, last      int // edits[first:last]
	oldStart, oldLen int
	newStart, newLen int
}

// hunks groups the changes with their context; changes closer than twice the
// context share a hunk.
func hunks(edits []edit) []hunk {
	var out []hunk
	oldLine, newLine := 0, 0 // lines of each side before edits[k]
	type pos struct{ old, new int }
	at := make([]pos, len(edits)+1)
	for k, e := range edits {
		at[k] = pos{oldLine, newLine}
		if e.op != '+' {
			oldLine++
		}
		if e.op != '-' {
			newLine++
		}
	}
	at[len(edits)] = pos{oldLine, newLine}
	for k := 0; k < len(edits); {
		if edits[k].op == ' ' {
			k++
			continue
		}
		first := max(0, k-context)
		last := k
		for last < len(edits) {
			if edits[last].op != ' ' {
				last++
				continue
			}
			run := last
			for run < len(edits) && edits[run].op == ' ' {
				run++
			}
			if run == len(edits) || run-last > 2*context {
				last = min(len(edits), last+context)
				break
			}
			last = run
		}
		out = append(out, hunk{first: first, last: last,
			oldStart: at[first].old, oldLen: at[last].old - at[first].old,
			newStart: at[first].new, newLen: at[last].new - at[first].new})
		k = last
	}
	return out
}

// span is a hunk header's "start,length" (1-based; a 0-length side names the line before).
func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
