package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lcs is the length of the longest common subsequence, by the textbook
// table: the reference that Myers' edit count must match.
func lcs(a, b []string) int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t[0][0]
}

// The edit script rebuilds both sides and is as short as possible.
func TestDiffLinesIsMinimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() []string {
		ls := make([]string, r.IntN(14))
		for i := range ls {
			ls[i] = string(rune('a'+r.IntN(3))) + "\n"
		}
		return ls
	}
	for range 3000 {
		a, b := gen(), gen()
		ops, ok := diffLines(a, b)
		if !ok {
			t.Fatalf("diffLines(%q, %q) gave up", a, b)
		}
		var gotA, gotB []string
		edits := 0
		for _, o := range ops {
			switch o.kind {
			case ' ':
				if a[o.ai] != b[o.bi] {
					t.Fatalf("kept unequal lines %q %q", a[o.ai], b[o.bi])
				}
				gotA, gotB = append(gotA, a[o.ai]), append(gotB, b[o.bi])
			case '-':
				gotA = append(gotA, a[o.ai])
				edits++
			case '+':
				gotB = append(gotB, b[o.bi])
				edits++
			}
		}
		if strings.Join(gotA, "") != strings.Join(a, "") || strings.Join(gotB, "") != strings.Join(b, "") {
			t.Fatalf("script does not rebuild %q -> %q: %v", a, b, ops)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("%q -> %q: %d edits, want %d", a, b, edits, want)
		}
	}
}

// The expected texts are GNU diff -u's output for the same files.
func TestUnifiedDiff(t *testing.T) {
	letters := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	for _, tc := range []struct{ name, old, new, want string }{
		{"equal", letters, letters, ""},
		{"two hunks, no final newline", letters, strings.Replace(letters, "b\n", "B\n", 1) + "n", `--- old
+++ new
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
\ No newline at end of file
`},
		{"from empty", "", "a\nb\n", "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\nb\n", "", "--- old\n+++ new\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{"one hunk when changes are close", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\nY\n8\n", `--- old
+++ new
@@ -1,8 +1,8 @@
 1
-2
+X
 3
 4
 5
 6
-7
+Y
 8
`},
	} {
		if got := unifiedDiff("old", "new", []byte(tc.old), []byte(tc.new)); got != tc.want {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

func TestUnifiedDiffGivesUpOnHugeChanges(t *testing.T) {
	var a, b strings.Builder
	for i := range maxDiffEdits {
		a.WriteString("a" + string(rune('0'+i%10)) + "\n")
		b.WriteString("b" + string(rune('0'+i%10)) + "\n")
	}
	got := unifiedDiff("old", "new", []byte(a.String()), []byte(b.String()))
	if !strings.Contains(got, "diff omitted") || strings.Count(got, "\n") != 3 {
		t.Errorf("got %q", got)
	}
}

// generate -check prints a diff per stale file.
func TestCheckPrintsDiff(t *testing.T) {
	dir := t.TempDir()
	specPath := writeSpec(t, dir, spec)
	out := filepath.Join(dir, "idem")
	args := []string{"generate", "-spec", specPath, "-out", out, "-store=false"}
	if code, _, errs := runCLI(t, "", args...); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	path := filepath.Join(out, "idemgen_policies.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "package idem\n", "package idem\n\n// hand edit\n", 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "", append(args, "-check")...)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"stale: " + path + "\n", "--- " + path + " (on disk)\n", "+++ " + path + " (generated)\n", "\n-// hand edit\n", "\n package idem\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}
