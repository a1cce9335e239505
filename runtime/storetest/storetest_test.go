package storetest_test

import (
	"testing"

	_ "github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// The suite run against a fresh memory store per subtest.
func TestRunMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idemrt.Store { return idemrt.NewMemoryStore() })
}
