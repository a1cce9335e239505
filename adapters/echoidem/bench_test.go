package echoidem_test

import (
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/adapters/echoidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkReplay: a replay through echo and the adapter, in process, beside
// the generated middleware around a ServeMux.
func BenchmarkReplay(b *testing.B) {
	p := contracttest.Policy("createCharge", "/charges")
	var runs atomic.Int64
	e := echo.New()
	mw, err := echoidem.Middleware(echoidem.Config{Options: idemrt.Options{Store: idemrt.NewMemoryStore()}}, p)
	if err != nil {
		b.Fatal(err)
	}
	e.Use(mw)
	e.POST("/charges", created(&runs))
	contracttest.BenchmarkReplay(b, "echo", e, p)
}
