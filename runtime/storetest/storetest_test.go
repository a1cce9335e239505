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

// The messaging suite against a fresh memory store per subtest.
func TestRunMessagingMemory(t *testing.T) {
	storetest.RunMessaging(t, func(t *testing.T) storetest.MessagingStore { return idemrt.NewMemoryStore() })
}
