package generator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/internal/location"
)

// Pos is a place in a spec file. Line and Col are 1-based; zero means
// unknown (the diagnostic then names the file, or the line, alone).
type Pos = location.Pos

// Severity says what a diagnostic stops.
type Severity int

const (
	// SeverityError stops generation.
	SeverityError Severity = iota
	// SeverityWarning is printed; generation goes on (lint exits 1).
	SeverityWarning
	// SeverityFinding is one of lint's own findings (an unannotated
	// operation, an API-design finding).
	SeverityFinding
	// SeverityNote says what Publish did with a part of the spec.
	SeverityNote
)

// prefix is written before the message: "warning: " and so on; nothing
// for an error.
func (s Severity) prefix() string {
	switch s {
	case SeverityWarning:
		return "warning: "
	case SeverityFinding:
		return "finding: "
	case SeverityNote:
		return "note: "
	}
	return ""
}

// Diagnostic is one problem found in a spec, at a place in it.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Msg      string
	// Frame, when set, shows the offending line with a caret under Pos
	// (load errors have one).
	Frame string
	// Cause is the error the diagnostic reports, when it reports one: the
	// loader's, or the runtime validator's *idemrt.FieldError.
	Cause error
}

// text is the diagnostic without its position: severity and message.
func (d Diagnostic) text() string { return d.Severity.prefix() + d.Msg }

func (d Diagnostic) String() string {
	if d.Frame != "" {
		return d.Pos.String() + ": " + d.text() + "\n" + d.Frame
	}
	return d.Pos.String() + ": " + d.text()
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

// Unwrap returns the causes of the diagnostics that have one, so that
// errors.As finds, say, the runtime's *idemrt.FieldError.
func (ds Diagnostics) Unwrap() []error {
	var out []error
	for _, d := range ds {
		if d.Cause != nil {
			out = append(out, d.Cause)
		}
	}
	return out
}

// Errors returns the diagnostics of severity error.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
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
			cmp.Compare(a.text(), b.text()),
		)
	})
	return slices.CompactFunc(out, func(a, b Diagnostic) bool {
		return a.Pos == b.Pos && a.Severity == b.Severity && a.Msg == b.Msg && a.Frame == b.Frame
	})
}

// diags collects diagnostics during one run.
type diags struct{ list Diagnostics }

func (d *diags) add(p Pos, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// addAs adds a diagnostic of severity s.
func (d *diags) addAs(s Severity, p Pos, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Severity: s, Msg: fmt.Sprintf(format, args...)})
}

// addCause adds an error diagnostic that reports cause.
func (d *diags) addCause(p Pos, cause error, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Msg: fmt.Sprintf(format, args...), Cause: cause})
}
