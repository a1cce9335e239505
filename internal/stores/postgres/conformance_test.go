package postgres

import (
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
)

func TestConformance(t *testing.T) {
	db := newTestDB(t)
	st := db.store(t)
	storetest.Run(t, func(t *testing.T) idemrt.Store { return st })
}
