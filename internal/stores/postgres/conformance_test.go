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

// The messaging suite (ProcessOnce, the outbox, relays) on a fresh
// database per subtest: the outbox subtests count every event.
func TestMessagingConformance(t *testing.T) {
	storetest.RunMessaging(t, func(t *testing.T) storetest.MessagingStore { return newTestDB(t).store(t) })
}
