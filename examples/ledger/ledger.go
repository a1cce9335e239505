package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The payments example publishes these two event types (their outbox
// topics); a subject or routing key ends with one of them.
const (
	topicChargeCreated = "charge.created"
	topicRefundCreated = "refund.created"
)

// ledgerSchema is the ledger's own tables. The processed-id table that
// deduplicates deliveries comes from the generated store
// (internal/ledgerstore, idemgen_schema.sql).
//
// ledger_entries has no unique constraint on event_id on purpose: a
// constraint would hide a second application of an event as an error that
// the consumer retries. Applying each event once is the job of the
// processed-id record written in the entry's transaction (ProcessOnce), and
// the end-to-end test counts entries per event id to prove it.
var ledgerSchema = []string{
	`CREATE TABLE IF NOT EXISTS ledger_entries (
		seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		event_id TEXT NOT NULL,
		event_type TEXT NOT NULL,
		account TEXT NOT NULL,
		charge TEXT NOT NULL,
		refund TEXT NOT NULL DEFAULT '',
		amount BIGINT NOT NULL,
		currency TEXT NOT NULL,
		occurred TEXT NOT NULL,
		applied TIMESTAMPTZ NOT NULL DEFAULT now())`,
	`CREATE INDEX IF NOT EXISTS ledger_entries_event_id ON ledger_entries (event_id)`,
	`CREATE TABLE IF NOT EXISTS ledger_balances (
		account TEXT NOT NULL,
		currency TEXT NOT NULL,
		balance BIGINT NOT NULL,
		entries BIGINT NOT NULL,
		PRIMARY KEY (account, currency))`,
}

func applyLedgerSchema(ctx context.Context, pool *pgxpool.Pool) error {
	for _, q := range ledgerSchema {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("ledger schema: %w", err)
		}
	}
	return nil
}

// chargeCreated and refundCreated are the events' payloads as the payments
// example writes them: the charge or refund as its API shows it, with the
// merchant account (and, for a refund, the charge's currency) added.
type chargeCreated struct {
	Account  string `json:"account"`
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Created  string `json:"created"`
}

type refundCreated struct {
	Account  string `json:"account"`
	ID       string `json:"id"`
	Charge   string `json:"charge"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Created  string `json:"created"`
}

// entry is one ledger line: a charge credits the merchant's balance, a
// refund debits it.
type entry struct {
	eventID, eventType      string
	account, charge, refund string
	amount                  int64
	currency, occurred      string
}

// errBadEvent marks an event the ledger cannot apply however often it is
// redelivered (unknown type, malformed payload): the adapter dead-letters
// it after its bounded deliveries.
var errBadEvent = errors.New("ledger: bad event")

// parseEvent turns one delivery (its id, its subject or routing key, and its
// body) into a ledger entry.
func parseEvent(id, subject string, body []byte) (entry, error) {
	e := entry{eventID: id}
	switch {
	case strings.HasSuffix(subject, topicChargeCreated):
		var c chargeCreated
		if err := json.Unmarshal(body, &c); err != nil {
			return e, fmt.Errorf("%w: %s %s: %v", errBadEvent, subject, id, err)
		}
		e.eventType, e.account, e.charge, e.amount, e.currency, e.occurred =
			topicChargeCreated, c.Account, c.ID, c.Amount, c.Currency, c.Created
	case strings.HasSuffix(subject, topicRefundCreated):
		var r refundCreated
		if err := json.Unmarshal(body, &r); err != nil {
			return e, fmt.Errorf("%w: %s %s: %v", errBadEvent, subject, id, err)
		}
		e.eventType, e.account, e.charge, e.refund, e.amount, e.currency, e.occurred =
			topicRefundCreated, r.Account, r.Charge, r.ID, -r.Amount, r.Currency, r.Created
	default:
		return e, fmt.Errorf("%w: %s: subject %q is neither %s nor %s", errBadEvent, id, subject, topicChargeCreated, topicRefundCreated)
	}
	if e.account == "" || e.charge == "" || e.currency == "" || e.amount == 0 {
		return e, fmt.Errorf("%w: %s %s: account, charge, currency and a non-zero amount are required", errBadEvent, subject, id)
	}
	return e, nil
}

// apply writes e through tx: the entry, and the account's balance. Neither
// write is idempotent by itself; the caller runs apply once per event id
// (ProcessOnce, through the broker adapter), in the transaction that
// records the id.
func apply(ctx context.Context, tx pgx.Tx, e entry) error {
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_entries (event_id, event_type, account, charge, refund, amount, currency, occurred)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		e.eventID, e.eventType, e.account, e.charge, e.refund, e.amount, e.currency, e.occurred); err != nil {
		return fmt.Errorf("ledger entry %s: %w", e.eventID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_balances (account, currency, balance, entries) VALUES ($1, $2, $3, 1)
		ON CONFLICT (account, currency) DO UPDATE SET balance = ledger_balances.balance + excluded.balance,
		entries = ledger_balances.entries + 1`,
		e.account, e.currency, e.amount); err != nil {
		return fmt.Errorf("ledger balance %s: %w", e.eventID, err)
	}
	return nil
}
