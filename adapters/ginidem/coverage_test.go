package ginidem_test

import (
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/adapters/ginidem"
	"github.com/idemgen/idemgen/internal/contracttest"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// idemrt.CheckCoverage proves a gin stack: a group under a prefix the
// policy does not name is reported until Options.BasePaths names it. Gin
// must answer 405 to a method it does not route (HandleMethodNotAllowed),
// or the check cannot tell a served path from an unserved one and
// reports every operation.
func TestCheckCoverage(t *testing.T) {
	t.Parallel()
	p := contracttest.Policy("createCharge", "/charges")
	stack := func(basePaths []string, methodNotAllowed bool) *gin.Engine {
		r := gin.New()
		r.HandleMethodNotAllowed = methodNotAllowed
		mw := middleware(t, ginidem.Config{Options: idemrt.Options{BasePaths: basePaths}}, p)
		r.Group("/api", mw).POST("/charges", func(c *gin.Context) { c.Status(201) })
		return r
	}
	check := func(r *gin.Engine, basePaths []string) error {
		return idemrt.CheckCoverage(r, []*idemrt.Policy{p}, idemrt.CoverageOptions{BasePaths: basePaths})
	}
	api := []string{"/api"}
	if err := check(stack(nil, true), nil); err == nil || !strings.Contains(err.Error(), "operation createCharge,") {
		t.Errorf("policy at /charges, served at /api/charges: CheckCoverage %v, want createCharge reported", err)
	}
	if err := check(stack(api, true), api); err != nil {
		t.Errorf("Options.BasePaths /api: %v", err)
	}
	if err := check(stack(api, false), api); err == nil {
		t.Errorf("without HandleMethodNotAllowed gin answers the router probe 404; CheckCoverage passed anyway")
	}
}
