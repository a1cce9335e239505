package main

import (
	"bytes"
	"fmt"
	"strings"
)

// A line diff for generate -check: Myers' O((N+M)D) algorithm on lines,
// printed in unified format with three lines of context. x/tools has one,
// but internal; nothing importable in our module graph prints a unified
// diff.

// diffContext is the number of unchanged lines around each change.
const diffContext = 3

// maxDiffEdits bounds the search (its memory grows with the square of the
// number of edits: about 8 MB at 1000); past it the files are reported as
// too different.
const maxDiffEdits = 1000

// unifiedDiff returns the unified diff from old to new, with the file
// names oldName and newName, or "" when they are equal.
func unifiedDiff(oldName, newName string, oldData, newData []byte) string {
	if bytes.Equal(oldData, newData) {
		return ""
	}
	a, b := splitLines(oldData), splitLines(newData)
	ops, ok := diffLines(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
	if !ok {
		fmt.Fprintf(&sb, "@@ more than %d lines differ (%d lines before, %d after); diff omitted @@\n", maxDiffEdits, len(a), len(b))
		return sb.String()
	}
	for _, h := range hunks(ops) {
		writeHunk(&sb, a, b, ops[h[0]:h[1]])
	}
	return sb.String()
}

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s []byte) []string {
	var lines []string
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, string(s))
			break
		}
		lines = append(lines, string(s[:i+1]))
		s = s[i+1:]
	}
	return lines
}

// op is one line of the edit script: kept (in both), deleted (from a) or
// inserted (from b). ai and bi are the line indexes in a and b at that
// point of the script.
type op struct {
	kind   byte // ' ', '-', '+'
	ai, bi int
}

// diffLines returns the edit script turning a into b, shortest first
// (Myers), or false when it needs more than maxDiffEdits edits.
func diffLines(a, b []string) ([]op, bool) {
	// Lines as ints, so that comparing is cheap.
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := intern(a), intern(b)
	n, m := len(x), len(y)
	maxD := min(n+m, maxDiffEdits)
	offset := maxD + 1
	v := make([]int, 2*maxD+3)
	// trace[d] is the frontier before step d, diagonals -d-1..d+1 only.
	var trace [][]int
	found := false
	for d := 0; d <= maxD && !found; d++ {
		trace = append(trace, append([]int(nil), v[offset-d-1:offset+d+2]...))
		for k := -d; k <= d; k += 2 {
			var i int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				i = v[offset+k+1] // down: insert
			} else {
				i = v[offset+k-1] + 1 // right: delete
			}
			j := i - k
			for i < n && j < m && x[i] == y[j] {
				i++
				j++
			}
			v[offset+k] = i
			if i >= n && j >= m {
				found = true
				break
			}
		}
	}
	if !found {
		return nil, false
	}
	// Walk back through the saved frontiers.
	var rev []op
	i, j := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		vd, base := trace[d], d+1
		k := i - j
		var prevK int
		if k == -d || (k != d && vd[base+k-1] < vd[base+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevI := vd[base+prevK]
		prevJ := prevI - prevK
		for i > prevI && j > prevJ && d > 0 {
			i--
			j--
			rev = append(rev, op{' ', i, j})
		}
		if d == 0 {
			for i > 0 && j > 0 {
				i--
				j--
				rev = append(rev, op{' ', i, j})
			}
			break
		}
		if i == prevI {
			j--
			rev = append(rev, op{'+', i, j})
		} else {
			i--
			rev = append(rev, op{'-', i, j})
		}
	}
	ops := make([]op, len(rev))
	for k, o := range rev {
		ops[len(rev)-1-k] = o
	}
	return ops, true
}

// hunks groups the changes of ops with their context: each is [start, end)
// in ops. Changes closer than twice the context share a hunk.
func hunks(ops []op) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of kept lines: does another change follow closely?
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, len(ops))
				break
			}
			end = run
		}
		out = append(out, [2]int{start, end})
		i = end
	}
	return out
}

func writeHunk(sb *strings.Builder, a, b []string, ops []op) {
	var na, nb int
	for _, o := range ops {
		switch o.kind {
		case ' ':
			na++
			nb++
		case '-':
			na++
		case '+':
			nb++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(ops[0].ai, na), hunkRange(ops[0].bi, nb))
	for _, o := range ops {
		line := ""
		switch o.kind {
		case ' ', '-':
			line = a[o.ai]
		case '+':
			line = b[o.bi]
		}
		sb.WriteByte(o.kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange is a hunk's "start,count" (1-based; an empty range names the
// line before it, as diff -u does).
func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
