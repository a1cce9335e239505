package generator

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/testutil"
)

// BenchmarkGenerate measures, on real specs, kin-openapi's load alone (the
// baseline: no origins, as Generate loads), Generate with every mutating
// operation annotated (policies and a PostgreSQL store), and Lint (a
// finding, with its position, for every mutating operation). Positions are
// read from the text, and only where a diagnostic needs one (package location).
// cpu-ns/op is the process's CPU time per operation (every thread,
// garbage collection included), steadier than ns/op on a shared machine.
// The ratios sub-benchmark runs the three in turn in every iteration, each
// followed by a garbage collection counted as its own (so that one does
// not pay for another's garbage), and reports generate/load and lint/load
// in CPU and wall time: load varies with the machine's load, the ratios
// much less.
//
//	go test ./generator -run '^$' -bench Generate -benchmem -count 5
func BenchmarkGenerate(b *testing.B) {
	for _, name := range []string{"stripe-api-2023-08-16.yaml", "square-connect-2025-04-16.json", "twilio-api-v2010-1.0.0.json"} {
		path := filepath.Join(testutil.SpecsDir(b), name)
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/load", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := openapi3.NewLoader().LoadFromData(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/generate", func(b *testing.B) {
			cfg := Config{Spec: name, SpecData: data, Package: "api", Dialect: "postgres",
				AnnotateMutating: map[string]any{"principal": "anonymous"}}
			b.SetBytes(int64(len(data)))
			defer reportCPU(b)()
			for b.Loop() {
				res, err := Generate(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Model.Operations) < 90 {
					b.Fatalf("%d operations", len(res.Model.Operations))
				}
			}
		})
		b.Run(name+"/ratios", func(b *testing.B) {
			gen := Config{Spec: name, SpecData: data, Package: "api", Dialect: "postgres",
				AnnotateMutating: map[string]any{"principal": "anonymous"}}
			lint := Config{Spec: name, SpecData: data}
			phases := []func() error{
				func() error { _, err := openapi3.NewLoader().LoadFromData(data); return err },
				func() error { _, err := Generate(context.Background(), gen); return err },
				func() error { _, err := Lint(context.Background(), lint); return err },
			}
			var cpu, wall [3]time.Duration
			for b.Loop() {
				for i, run := range phases {
					c, w := cpuTime(), time.Now()
					if err := run(); err != nil {
						b.Fatal(err)
					}
					goruntime.GC()
					cpu[i] += cpuTime() - c
					wall[i] += time.Since(w)
				}
			}
			b.ReportMetric(float64(cpu[0])/float64(b.N), "load-cpu-ns/op")
			b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "generate/load-cpu")
			b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "lint/load-cpu")
			b.ReportMetric(float64(wall[1])/float64(wall[0]), "generate/load-wall")
			b.ReportMetric(float64(wall[2])/float64(wall[0]), "lint/load-wall")
		})
		// What Generate and Lint do besides loading: the model (with
		// positions for Lint's findings, and for the annotations' keys)
		// and the files.
		b.Run(name+"/generate-after-load", func(b *testing.B) {
			cfg := Config{Spec: name, SpecData: data, Package: "api", Dialect: "postgres",
				AnnotateMutating: map[string]any{"principal": "anonymous"}}
			loaded, err := load(context.Background(), cfg, data)
			if err != nil {
				b.Fatal(err)
			}
			defer reportCPU(b)()
			for b.Loop() {
				bb := &builder{cfg: cfg, doc: loaded.doc, files: newSpecFiles(cfg, data)}
				m, w, err := bb.model()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := emit(cfg, m, w); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/lint-after-load", func(b *testing.B) {
			cfg := Config{Spec: name, SpecData: data}
			loaded, err := load(context.Background(), cfg, data)
			if err != nil {
				b.Fatal(err)
			}
			defer reportCPU(b)()
			for b.Loop() {
				bb := &builder{cfg: cfg, doc: loaded.doc, files: newSpecFiles(cfg, data)}
				bb.run()
				bb.lintUnannotated()
				if len(bb.advice.list) < 90 || bb.advice.list[0].Pos.Line == 0 {
					b.Fatalf("%d findings", len(bb.advice.list))
				}
			}
		})
		b.Run(name+"/lint", func(b *testing.B) {
			cfg := Config{Spec: name, SpecData: data}
			b.SetBytes(int64(len(data)))
			defer reportCPU(b)()
			for b.Loop() {
				ds, err := Lint(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if len(ds) < 90 || ds[0].Pos.Line == 0 {
					b.Fatalf("%d findings, first %v", len(ds), ds[0])
				}
			}
		})
	}
}

// reportCPU starts measuring the CPU time of b's loop; call the function
// it returns when the loop is done.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if start > 0 && b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
