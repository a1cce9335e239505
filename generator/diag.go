package generator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a place in a spec file. Line and Col are 1-based; zero means
// unknown (the diagnostic then names the file, or the line, alone).
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Diagnostic is one problem found in a spec, at a place in it.
type Diagnostic struct {
	Pos Pos
	Msg string
	// Frame, when set, shows the offending line with a caret under Pos
	// (load errors have one).
	Frame string
}

func (d Diagnostic) String() string {
	if d.Frame != "" {
		return d.Pos.String() + ": " + d.Msg + "\n" + d.Frame
	}
	return d.Pos.String() + ": " + d.Msg
}

// Diagnostics is every problem found in one run, sorted by position. It is
// the error Generate returns for a spec it cannot generate from; its Error is
// one "file:line:col: message" per line.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// sorted returns ds sorted by file, line, column and message, without
// duplicates.
func (ds Diagnostics) sorted() Diagnostics {
	out := slices.Clone(ds)
	slices.SortStableFunc(out, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
	return slices.Compact(out)
}

// diags collects diagnostics during one run.
type diags struct{ list Diagnostics }

func (d *diags) add(p Pos, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (d *diags) err() error {
	if len(d.list) == 0 {
		return nil
	}
	return d.list.sorted()
}
