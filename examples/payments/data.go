package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Charge is one charge as the API shows it.
type Charge struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Customer       string `json:"customer"`
	Description    string `json:"description,omitempty"`
	AmountRefunded int64  `json:"amount_refunded"`
	Created        string `json:"created"`
}

// Refund is one refund.
type Refund struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Charge  string `json:"charge"`
	Amount  int64  `json:"amount"`
	Reason  string `json:"reason,omitempty"`
	Created string `json:"created"`
}

// Customer is a customer record, replaced whole by PUT.
type Customer struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
}

// Order is an order record, replaced whole by PUT.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Event is a payment event received on the webhook.
type Event struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Received string `json:"received"`
}

var (
	errNotFound       = errors.New("not found")
	errRefundTooLarge = errors.New("refund exceeds the amount left on the charge")
	errNoTx           = errors.New("no idempotency transaction in the request context (is the operation transactional?)")
)

// dataStore is the service's own tables, on the same database as the
// idempotency keys. The methods documented "in the request's transaction"
// write through the transaction that the generated middleware opened for a
// transactional operation, so that their writes and the idempotency record
// commit or roll back together.
type dataStore interface {
	// InsertCharge inserts c, and its charge.created event into the
	// outbox, in the request's transaction.
	InsertCharge(ctx context.Context, account string, c Charge) error
	ListCharges(ctx context.Context, account string, limit int) ([]Charge, error)
	GetCharge(ctx context.Context, account, id string) (Charge, error)
	// InsertRefund records r against its charge, and its refund.created
	// event into the outbox, in the request's transaction: errNotFound when
	// the charge is not the account's, errRefundTooLarge when it would
	// refund more than was charged.
	InsertRefund(ctx context.Context, account string, r Refund) error
	PutCustomer(ctx context.Context, account string, c Customer) error
	PutOrder(ctx context.Context, account string, o Order) error
	// DeleteOrder soft-deletes an order; it reports errNotFound only when
	// the order never existed (deleting a deleted order succeeds).
	DeleteOrder(ctx context.Context, account, id string) error
	// RecordEvent records e once, in the request's transaction; first is
	// false when the event id was already processed.
	RecordEvent(ctx context.Context, e Event, payload []byte) (first bool, err error)
	ListEvents(ctx context.Context, limit int) ([]Event, error)
}

// The events the outbox carries (examples/ledger consumes them). Each is
// written in the transaction of its charge or refund, so it exists exactly
// when the row does; its id is derived from the row (the event type and the
// charge's or refund's id), so it is the same however often it is read or
// published, and it is the broker's message id by which duplicates drop.
const (
	topicChargeCreated = "charge.created"
	topicRefundCreated = "refund.created"
)

// chargeCreated is the event of a new charge: the charge as the API shows
// it, with the merchant account. The key is the charge, so that a charge's
// events (created, then its refunds) are published in order.
func chargeCreated(account string, c Charge) (idemrt.OutboxEvent, error) {
	payload, err := json.Marshal(struct {
		Account string `json:"account"`
		Charge
	}{account, c})
	return idemrt.OutboxEvent{ID: topicChargeCreated + ":" + c.ID, Topic: topicChargeCreated, Key: c.ID, Payload: payload}, err
}

// refundCreated is the event of a new refund: the refund as the API shows
// it, with the merchant account and the charge's currency.
func refundCreated(account, currency string, r Refund) (idemrt.OutboxEvent, error) {
	payload, err := json.Marshal(struct {
		Account  string `json:"account"`
		Currency string `json:"currency"`
		Refund
	}{account, currency, r})
	return idemrt.OutboxEvent{ID: topicRefundCreated + ":" + r.ID, Topic: topicRefundCreated, Key: r.Charge, Payload: payload}, err
}

func newID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

// Application tables, per dialect. The idempotency tables come from the
// generated package (idemgen_schema.sql).
var appSchema = map[string][]string{
	"sqlite": {
		`CREATE TABLE IF NOT EXISTS charges (
			seq INTEGER PRIMARY KEY AUTOINCREMENT,
			id TEXT NOT NULL UNIQUE,
			account TEXT NOT NULL,
			amount INTEGER NOT NULL,
			currency TEXT NOT NULL,
			customer TEXT NOT NULL,
			description TEXT NOT NULL DEFAULT '',
			amount_refunded INTEGER NOT NULL DEFAULT 0,
			created TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS charges_account_seq ON charges (account, seq)`,
		`CREATE TABLE IF NOT EXISTS refunds (
			seq INTEGER PRIMARY KEY AUTOINCREMENT,
			id TEXT NOT NULL UNIQUE,
			account TEXT NOT NULL,
			charge TEXT NOT NULL,
			amount INTEGER NOT NULL,
			reason TEXT NOT NULL DEFAULT '',
			created TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS customers (
			account TEXT NOT NULL,
			id TEXT NOT NULL,
			name TEXT NOT NULL,
			email TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS orders (
			account TEXT NOT NULL,
			id TEXT NOT NULL,
			customer TEXT NOT NULL,
			amount INTEGER NOT NULL,
			currency TEXT NOT NULL,
			deleted_at TEXT,
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS payment_events (
			seq INTEGER PRIMARY KEY AUTOINCREMENT,
			id TEXT NOT NULL UNIQUE,
			type TEXT NOT NULL,
			payload TEXT NOT NULL,
			received TEXT NOT NULL)`,
	},
	"postgres": {
		`CREATE TABLE IF NOT EXISTS charges (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id TEXT NOT NULL UNIQUE,
			account TEXT NOT NULL,
			amount BIGINT NOT NULL,
			currency TEXT NOT NULL,
			customer TEXT NOT NULL,
			description TEXT NOT NULL DEFAULT '',
			amount_refunded BIGINT NOT NULL DEFAULT 0,
			created TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS charges_account_seq ON charges (account, seq)`,
		`CREATE TABLE IF NOT EXISTS refunds (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id TEXT NOT NULL UNIQUE,
			account TEXT NOT NULL,
			charge TEXT NOT NULL,
			amount BIGINT NOT NULL,
			reason TEXT NOT NULL DEFAULT '',
			created TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS customers (
			account TEXT NOT NULL,
			id TEXT NOT NULL,
			name TEXT NOT NULL,
			email TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS orders (
			account TEXT NOT NULL,
			id TEXT NOT NULL,
			customer TEXT NOT NULL,
			amount BIGINT NOT NULL,
			currency TEXT NOT NULL,
			deleted_at TEXT,
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS payment_events (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id TEXT NOT NULL UNIQUE,
			type TEXT NOT NULL,
			payload TEXT NOT NULL,
			received TEXT NOT NULL)`,
	},
	"mysql": {
		`CREATE TABLE IF NOT EXISTS charges (
			seq BIGINT AUTO_INCREMENT PRIMARY KEY,
			id VARCHAR(64) NOT NULL UNIQUE,
			account VARCHAR(255) NOT NULL,
			amount BIGINT NOT NULL,
			currency VARCHAR(3) NOT NULL,
			customer VARCHAR(255) NOT NULL,
			description TEXT NOT NULL,
			amount_refunded BIGINT NOT NULL DEFAULT 0,
			created VARCHAR(40) NOT NULL,
			INDEX charges_account_seq (account, seq))`,
		`CREATE TABLE IF NOT EXISTS refunds (
			seq BIGINT AUTO_INCREMENT PRIMARY KEY,
			id VARCHAR(64) NOT NULL UNIQUE,
			account VARCHAR(255) NOT NULL,
			charge VARCHAR(64) NOT NULL,
			amount BIGINT NOT NULL,
			reason TEXT NOT NULL,
			created VARCHAR(40) NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS customers (
			account VARCHAR(255) NOT NULL,
			id VARCHAR(255) NOT NULL,
			name TEXT NOT NULL,
			email TEXT NOT NULL,
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS orders (
			account VARCHAR(255) NOT NULL,
			id VARCHAR(255) NOT NULL,
			customer VARCHAR(255) NOT NULL,
			amount BIGINT NOT NULL,
			currency VARCHAR(3) NOT NULL,
			deleted_at VARCHAR(40) NULL,
			PRIMARY KEY (account, id))`,
		`CREATE TABLE IF NOT EXISTS payment_events (
			seq BIGINT AUTO_INCREMENT PRIMARY KEY,
			id VARCHAR(255) NOT NULL UNIQUE,
			type VARCHAR(255) NOT NULL,
			payload MEDIUMTEXT NOT NULL,
			received VARCHAR(40) NOT NULL)`,
	},
}
