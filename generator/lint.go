package generator

import (
	"context"
	"os"
)

// Lint reports the POST, PUT, PATCH and DELETE operations under `paths`
// that carry no x-idempotent at all (`x-idempotent: false` marks an
// operation as deliberately unprotected and silences it), together with
// every problem and warning Generate would report. Only cfg.Spec and
// cfg.SpecData are used. The error is for documents that cannot be read or
// loaded; the findings, sorted, are the Diagnostics.
func Lint(ctx context.Context, cfg Config) (Diagnostics, error) {
	data := cfg.SpecData
	if data == nil {
		var err error
		if data, err = os.ReadFile(cfg.Spec); err != nil {
			return nil, err
		}
	}
	cfg.AnnotateMutating = nil
	if cfg.Package == "" {
		cfg.Package = "lint"
	}
	b, err := load(ctx, cfg, data)
	if err != nil {
		return nil, err
	}
	b.run()
	all := append(append(b.d.list, b.w.list...), b.unannotated...)
	return all.sorted(), nil
}
