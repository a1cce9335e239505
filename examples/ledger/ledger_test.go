package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/ledger/internal/ledgerstore"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
)

func TestParseEvent(t *testing.T) {
	charge := `{"account":"acct_1","id":"ch_1","object":"charge","amount":2000,"currency":"usd","customer":"cus_1","amount_refunded":0,"created":"2026-12-02T06:00:00.000000Z"}`
	refund := `{"account":"acct_1","currency":"usd","id":"re_1","object":"refund","charge":"ch_1","amount":500,"created":"2026-12-02T06:00:01.000000Z"}`
	e, err := parseEvent("charge.created:ch_1", "run.payments.charge.created", []byte(charge))
	if err != nil || e.eventType != topicChargeCreated || e.account != "acct_1" || e.charge != "ch_1" || e.amount != 2000 || e.currency != "usd" {
		t.Errorf("charge: %+v, %v", e, err)
	}
	e, err = parseEvent("refund.created:re_1", "payments.refund.created", []byte(refund))
	if err != nil || e.eventType != topicRefundCreated || e.refund != "re_1" || e.charge != "ch_1" || e.amount != -500 || e.currency != "usd" {
		t.Errorf("refund: %+v, %v", e, err)
	}
	for _, c := range []struct{ subject, body, want string }{
		{"payments.charge.deleted", charge, "neither"},
		{"payments.charge.created", `{"account":`, "unexpected end"},
		{"payments.charge.created", `{"account":"acct_1","id":"ch_1","amount":0,"currency":"usd"}`, "non-zero amount"},
		{"payments.refund.created", `{"id":"re_1","charge":"ch_1","amount":5,"currency":"usd"}`, "account"},
	} {
		_, err := parseEvent("x", c.subject, []byte(c.body))
		if !errors.Is(err, errBadEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want a bad event mentioning %q", c.subject, c.body, err, c.want)
		}
	}
}

// TestApplyOnce delivers each of 20 events 5 times from 5 goroutines at
// once through ProcessOnce with the generated store: each applies once.
// The same deliveries without ProcessOnce apply 5 times each (the ledger
// table has no unique constraint on the event id, so the end-to-end test
// can see a duplicate).
func TestApplyOnce(t *testing.T) {
	dsn := freshDatabase(t, testutil.PostgresDSN(t), "ledger_apply_")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := ledgerstore.ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := applyLedgerSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store, err := ledgerstore.NewStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"account":"acct_1","id":"ch_1","amount":100,"currency":"usd","created":"x"}`)
	deliver := func(once bool) {
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					id := "charge.created:ch_" + string(rune('a'+i))
					if once {
						if _, err := idemrt.ProcessOnce(ctx, store, "ledger", id, func(ctx context.Context) error {
							return applyDelivery(ctx, id, "payments.charge.created", body)
						}); err != nil {
							t.Error(err)
						}
						continue
					}
					tx, err := store.BeginTx(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					e, _ := parseEvent(id, "payments.charge.created", body)
					if err := apply(ctx, tx.Handle().(pgx.Tx), e); err != nil {
						t.Error(err)
					}
					if err := tx.Commit(ctx); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
	}
	count := func() (entries, balance int64) {
		if err := pool.QueryRow(ctx, `SELECT count(*), coalesce((SELECT sum(balance) FROM ledger_balances), 0) FROM ledger_entries`).Scan(&entries, &balance); err != nil {
			t.Fatal(err)
		}
		return
	}
	deliver(true)
	if n, b := count(); n != 20 || b != 2000 {
		t.Fatalf("with ProcessOnce: %d entries, balance %d; want 20 and 2000", n, b)
	}
	deliver(false)
	if n, b := count(); n != 20+100 || b != 2000+10000 {
		t.Fatalf("without ProcessOnce: %d entries, balance %d; want 120 and 12000", n, b)
	}
}
