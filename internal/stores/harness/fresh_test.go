package harness

import (
	"testing"

	"github.com/idemgen/idemgen/templates"
)

// TestRendered checks that internal/stores/<dialect> holds what idemgen
// renders for each dialect; go test ./internal/stores/harness -update
// rewrites them. It lives here, not in the rendered packages, so that it
// still runs when a template change breaks their build.
func TestRendered(t *testing.T) {
	for _, d := range templates.Dialects {
		t.Run(d, func(t *testing.T) { CheckRendered(t, d) })
	}
}
