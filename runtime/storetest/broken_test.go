package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// checkThenInsert looks the key up and inserts it in two steps: the defect
// CONTRACT §4 forbids.
type checkThenInsert struct{ *idemrt.MemoryStore }

var racyMu sync.Mutex

func (s checkThenInsert) Claim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	// Peek with a claim on a probe scope, then claim for real after a gap.
	probe := req
	probe.Scope = "probe:" + req.Scope + ":" + time.Now().String()
	_, _ = s.MemoryStore.Claim(ctx, probe)
	time.Sleep(time.Millisecond)
	racyMu.Lock()
	defer racyMu.Unlock()
	res, err := s.MemoryStore.Claim(ctx, req)
	if err == nil && res.State == idemrt.InProgress {
		// Pretend the earlier lookup found nothing: insert over it.
		return idemrt.ClaimResult{State: idemrt.Acquired, Epoch: res.Epoch}, nil
	}
	return res, err
}

// noFencing ignores epochs on Complete: it completes whatever epoch near
// the caller's the record is at.
type noFencing struct{ *idemrt.MemoryStore }

func (s noFencing) Complete(ctx context.Context, c idemrt.Completion) error {
	base := c.Epoch
	for e := base - 5; e < base+5; e++ {
		c.Epoch = e
		if err := s.MemoryStore.Complete(ctx, c); err == nil {
			return nil
		}
	}
	return nil
}

// neverExpires keeps completed records forever.
type neverExpires struct{ *idemrt.MemoryStore }

func (s neverExpires) Complete(ctx context.Context, c idemrt.Completion) error {
	c.TTL = time.Hour
	return s.MemoryStore.Complete(ctx, c)
}

func TestBrokenStoreHelper(t *testing.T) {
	var mk func() idemrt.Store
	switch os.Getenv("STORETEST_BROKEN") {
	case "check-then-insert":
		mk = func() idemrt.Store { return checkThenInsert{idemrt.NewMemoryStore()} }
	case "no-fencing":
		mk = func() idemrt.Store { return noFencing{idemrt.NewMemoryStore()} }
	case "never-expires":
		mk = func() idemrt.Store { return neverExpires{idemrt.NewMemoryStore()} }
	case "sweeps-but-claims-self-expiring":
		// A store that says its server expires records but whose Sweep
		// deletes them (the memory store's).
		storetest.RunWith(t, storetest.Config{SelfExpiring: true}, func(t *testing.T) idemrt.Store { return idemrt.NewMemoryStore() })
		return
	default:
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	storetest.Run(t, func(t *testing.T) idemrt.Store { return mk() })
}

// The suite must fail for stores with the classic defects.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in subprocesses")
	}
	for broken, failing := range map[string]string{
		"check-then-insert":               "--- FAIL: TestBrokenStoreHelper/ConcurrentClaimsOneWinner",
		"no-fencing":                      "--- FAIL: TestBrokenStoreHelper/StaleEpochFencedOnComplete",
		"never-expires":                   "--- FAIL: TestBrokenStoreHelper/ExpiredCompletedIsAbsent",
		"sweeps-but-claims-self-expiring": "--- FAIL: TestBrokenStoreHelper/SweepDeletesOnlyExpiredInBatches",
	} {
		t.Run(broken, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStoreHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a %s store:\n%s", broken, out)
			}
			if !strings.Contains(string(out), failing) {
				t.Fatalf("want %q in the output:\n%s", failing, out)
			}
		})
	}
}
