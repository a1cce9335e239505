package echoidem_test

import (
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/adapters/echoidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// idemrt.CheckCoverage proves an echo stack: routes of a group under a
// prefix the policy does not name are reported until Options.BasePaths
// names it. The middleware must be registered with e.Use for the check: a
// group with middleware answers every other method 404 (echo adds
// catch-all routes for it), so the check cannot tell whether the group
// serves the path and reports the operation.
func TestCheckCoverage(t *testing.T) {
	t.Parallel()
	p := contracttest.Policy("createCharge", "/charges")
	stack := func(basePaths []string, onGroup bool) *echo.Echo {
		e := echo.New()
		mw := middleware(t, echoidem.Config{Options: idemrt.Options{BasePaths: basePaths}}, p)
		g := e.Group("/api")
		if onGroup {
			g.Use(mw)
		} else {
			e.Use(mw)
		}
		g.POST("/charges", func(c echo.Context) error { return c.NoContent(201) })
		return e
	}
	check := func(e *echo.Echo, basePaths []string) error {
		return idemrt.CheckCoverage(e, []*idemrt.Policy{p}, idemrt.CoverageOptions{BasePaths: basePaths})
	}
	if err := check(stack(nil, false), nil); err == nil || !strings.Contains(err.Error(), "operation createCharge,") {
		t.Errorf("policy at /charges, served at /api/charges: CheckCoverage %v, want createCharge reported", err)
	}
	api := []string{"/api"}
	if err := check(stack(api, false), api); err != nil {
		t.Errorf("Options.BasePaths /api: %v", err)
	}
	if err := check(stack(api, true), api); err == nil {
		t.Errorf("a group with middleware answers the router probe 404; CheckCoverage passed anyway")
	}
}
