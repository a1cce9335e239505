package ginidem_test

import (
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/adapters/ginidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkReplay: a replay through gin and the adapter, in process, beside
// the generated middleware around a ServeMux.
func BenchmarkReplay(b *testing.B) {
	p := contracttest.Policy("createCharge", "/charges")
	var runs atomic.Int64
	e := gin.New()
	mw, err := ginidem.Middleware(ginidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}}, p)
	if err != nil {
		b.Fatal(err)
	}
	e.Use(mw)
	e.POST("/charges", created(&runs))
	contracttest.BenchmarkReplay(b, "gin", e, p)
}
