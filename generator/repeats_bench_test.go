package generator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/generator/internal/location"
	"github.com/idemgen/idemgen/internal/testutil"
)

// BenchmarkJSONRepeats measures the repeat scan Generate and Lint run on
// every JSON file of a spec, on the corpus's largest JSON specs (a YAML
// file costs one look at its first byte).
//
//	go test ./generator -run '^$' -bench JSONRepeats -benchmem -count 5
func BenchmarkJSONRepeats(b *testing.B) {
	for _, name := range []string{"square-connect-2025-08-20.json", "square-connect-2025-04-16.json", "twilio-api-v2010-1.0.0.json"} {
		data, err := os.ReadFile(filepath.Join(testutil.SpecsDir(b), name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			defer reportCPU(b)()
			for b.Loop() {
				if reps, ok := location.JSONRepeats(data); !ok || len(reps) > 0 {
					b.Fatalf("ok=%v, %d repeats", ok, len(reps))
				}
			}
		})
	}
}
