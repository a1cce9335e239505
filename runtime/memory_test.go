package runtime_test

import (
	"testing"

	_ "github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	shared := idemrt.NewMemoryStore()
	storetest.Run(t, func(t *testing.T) idemrt.Store { return shared })
}
