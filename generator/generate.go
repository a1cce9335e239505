// Package generator turns an OpenAPI document annotated with x-idempotent
// into the files of one Go package: the policies and middleware
// (idemgen_policies.go) and the SQL key store of the chosen dialect.
//
// It works in three steps: load the document (kin-openapi), build a typed
// model of the annotated operations (every annotation decoded strictly,
// every problem reported with its position), then emit files from the
// model alone. Generate returns the files; it writes nothing.
package generator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/idemgen/idemgen/templates"
)

// Config is what one generation needs.
type Config struct {
	// Spec is the path of the OpenAPI document. Diagnostics name it as
	// given.
	Spec string
	// SpecData, when non-nil, is the document's content; Spec is then only
	// its name (for diagnostics and the package doc).
	SpecData []byte
	// Package is the Go package name of the generated code.
	Package string
	// Dialect is the SQL dialect of the key store: postgres, sqlite or
	// mysql. Required unless SkipStore is set.
	Dialect string
	// Table is the key table's name; empty means idempotency_keys.
	Table string
	// SkipStore leaves out the SQL schema and the key store: only the
	// policies and middleware are generated.
	SkipStore bool
	// AnnotateMutating, when non-nil, is applied as the x-idempotent
	// annotation of every POST, PUT, PATCH and DELETE operation under
	// `paths` that has none (an empty map means `x-idempotent: true`).
	// It is an overlay for specs one cannot edit.
	AnnotateMutating map[string]any
}

// Result is the generated package: file name (relative to the output
// folder, always "idemgen_*") -> content.
type Result struct {
	Files map[string][]byte
	// Model is the typed model the files were emitted from.
	Model *Model
	// Warnings are findings that did not stop generation (e.g. an
	// authenticated operation annotated principal: anonymous), sorted.
	Warnings Diagnostics
}

// PoliciesFile is the name of the Go file holding the policies.
const PoliciesFile = "idemgen_policies.go"

// ErrConfig wraps errors in Config itself (as opposed to the spec's).
var ErrConfig = errors.New("invalid configuration")

func (c *Config) check() error {
	var errs []error
	if c.Spec == "" {
		errs = append(errs, fmt.Errorf("%w: no spec given", ErrConfig))
	}
	if !validPackage(c.Package) {
		errs = append(errs, fmt.Errorf("%w: package name %q is not a Go identifier", ErrConfig, c.Package))
	}
	if !c.SkipStore {
		switch c.Dialect {
		case templates.Postgres, templates.SQLite, templates.MySQL:
		case "":
			errs = append(errs, fmt.Errorf("%w: no dialect given (want postgres, sqlite or mysql)", ErrConfig))
		default:
			hint := ""
			if s := suggest(c.Dialect, []string{templates.Postgres, templates.SQLite, templates.MySQL}); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			errs = append(errs, fmt.Errorf("%w: unknown dialect %q (want postgres, sqlite or mysql)%s", ErrConfig, c.Dialect, hint))
		}
	}
	if c.Table != "" {
		if err := templates.ValidateTable(c.Table); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
		}
	}
	return errors.Join(errs...)
}

// Generate loads the spec and returns the generated files. Spec problems
// come back as Diagnostics (every one found, sorted); configuration
// problems wrap ErrConfig. It is safe to call concurrently.
func Generate(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	data := cfg.SpecData
	if data == nil {
		var err error
		data, err = os.ReadFile(cfg.Spec)
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	model, warnings, err := build(ctx, cfg, data)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	src, err := emitPolicies(model)
	if err != nil {
		return nil, err
	}
	res := &Result{Files: map[string][]byte{PoliciesFile: src}, Model: model, Warnings: warnings}
	if !cfg.SkipStore {
		table := cfg.Table
		if table == "" {
			table = DefaultTable
		}
		files, err := templates.Render(templates.Data{Package: cfg.Package, Dialect: cfg.Dialect, Table: table})
		if err != nil {
			return nil, fmt.Errorf("rendering the %s key store: %w", cfg.Dialect, err)
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			if filepath.Base(name) != name || len(name) < len("idemgen_") || name[:len("idemgen_")] != "idemgen_" {
				return nil, fmt.Errorf("store template produced %q, not an idemgen_* file name", name)
			}
			if _, dup := res.Files[name]; dup {
				return nil, fmt.Errorf("store template produced %q twice", name)
			}
			res.Files[name] = files[name]
		}
	}
	return res, nil
}
