package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// sqlData is the dataStore on database/sql, for SQLite and MySQL (both use
// ? placeholders; only the upserts differ).
type sqlData struct {
	db            *sql.DB
	mysql         bool
	txFrom        func(context.Context) (*sql.Tx, bool)
	markProcessed func(ctx context.Context, tx *sql.Tx, consumer, messageID string) (bool, error)
	// addEvents writes outbox events in tx (the generated AddEvents).
	addEvents func(ctx context.Context, tx *sql.Tx, events ...idemrt.OutboxEvent) error
}

func (d *sqlData) tx(ctx context.Context) (*sql.Tx, error) {
	tx, ok := d.txFrom(ctx)
	if !ok || tx == nil {
		return nil, errNoTx
	}
	return tx, nil
}

func (d *sqlData) InsertCharge(ctx context.Context, account string, c Charge) error {
	tx, err := d.tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx,
		`INSERT INTO charges (id, account, amount, currency, customer, description, amount_refunded, created) VALUES (?, ?, ?, ?, ?, ?, 0, ?)`,
		c.ID, account, c.Amount, c.Currency, c.Customer, c.Description, c.Created)
	if err != nil {
		return err
	}
	ev, err := chargeCreated(account, c)
	if err != nil {
		return err
	}
	return d.addEvents(ctx, tx, ev)
}

const chargeColumns = `id, amount, currency, customer, description, amount_refunded, created`

// scanner is a row (pgx.Row, *sql.Row) or the current row of a result.
type scanner interface{ Scan(...any) error }

func scanCharge(s scanner) (Charge, error) {
	c := Charge{Object: "charge"}
	err := s.Scan(&c.ID, &c.Amount, &c.Currency, &c.Customer, &c.Description, &c.AmountRefunded, &c.Created)
	return c, err
}

func scanEvent(s scanner) (Event, error) {
	var e Event
	err := s.Scan(&e.ID, &e.Type, &e.Received)
	return e, err
}

// collect scans every row of a result (pgx.Rows and *sql.Rows alike; the
// caller closes it) and never returns a nil slice, so an empty list
// encodes as [].
func collect[T any](rows interface {
	scanner
	Next() bool
	Err() error
}, scan func(scanner) (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (d *sqlData) ListCharges(ctx context.Context, account string, limit int) ([]Charge, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+chargeColumns+` FROM charges WHERE account = ? ORDER BY seq DESC LIMIT ?`, account, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanCharge)
}

func (d *sqlData) GetCharge(ctx context.Context, account, id string) (Charge, error) {
	c, err := scanCharge(d.db.QueryRowContext(ctx, `SELECT `+chargeColumns+` FROM charges WHERE account = ? AND id = ?`, account, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, errNotFound
	}
	return c, err
}

func (d *sqlData) InsertRefund(ctx context.Context, account string, r Refund) error {
	tx, err := d.tx(ctx)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx,
		`UPDATE charges SET amount_refunded = amount_refunded + ? WHERE account = ? AND id = ? AND amount_refunded + ? <= amount`,
		r.Amount, account, r.Charge, r.Amount)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM charges WHERE account = ? AND id = ?`, account, r.Charge).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		return errRefundTooLarge
	}
	_, err = tx.ExecContext(ctx,
		`INSERT INTO refunds (id, account, charge, amount, reason, created) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, account, r.Charge, r.Amount, r.Reason, r.Created)
	if err != nil {
		return err
	}
	// The UPDATE above locked the charge's row: its currency is settled.
	var currency string
	if err := tx.QueryRowContext(ctx, `SELECT currency FROM charges WHERE account = ? AND id = ?`, account, r.Charge).Scan(&currency); err != nil {
		return err
	}
	ev, err := refundCreated(account, currency, r)
	if err != nil {
		return err
	}
	return d.addEvents(ctx, tx, ev)
}

func (d *sqlData) PutCustomer(ctx context.Context, account string, c Customer) error {
	q := `INSERT INTO customers (account, id, name, email) VALUES (?, ?, ?, ?)
		ON CONFLICT (account, id) DO UPDATE SET name = excluded.name, email = excluded.email`
	if d.mysql {
		q = `INSERT INTO customers (account, id, name, email) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE name = VALUES(name), email = VALUES(email)`
	}
	_, err := d.db.ExecContext(ctx, q, account, c.ID, c.Name, c.Email)
	return err
}

func (d *sqlData) PutOrder(ctx context.Context, account string, o Order) error {
	q := `INSERT INTO orders (account, id, customer, amount, currency, deleted_at) VALUES (?, ?, ?, ?, ?, NULL)
		ON CONFLICT (account, id) DO UPDATE SET customer = excluded.customer, amount = excluded.amount,
		currency = excluded.currency, deleted_at = NULL`
	if d.mysql {
		q = `INSERT INTO orders (account, id, customer, amount, currency, deleted_at) VALUES (?, ?, ?, ?, ?, NULL)
		ON DUPLICATE KEY UPDATE customer = VALUES(customer), amount = VALUES(amount),
		currency = VALUES(currency), deleted_at = NULL`
	}
	_, err := d.db.ExecContext(ctx, q, account, o.ID, o.Customer, o.Amount, o.Currency)
	return err
}

func (d *sqlData) DeleteOrder(ctx context.Context, account, id string) error {
	res, err := d.db.ExecContext(ctx, `UPDATE orders SET deleted_at = ? WHERE account = ? AND id = ? AND deleted_at IS NULL`, now(), account, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var one int
	err = d.db.QueryRowContext(ctx, `SELECT 1 FROM orders WHERE account = ? AND id = ?`, account, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFound
	}
	return err // nil: it was deleted before, which is success
}

func (d *sqlData) RecordEvent(ctx context.Context, e Event, payload []byte) (bool, error) {
	tx, err := d.tx(ctx)
	if err != nil {
		return false, err
	}
	first, err := d.markProcessed(ctx, tx, "payment-events", e.ID)
	if err != nil || !first {
		return first, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO payment_events (id, type, payload, received) VALUES (?, ?, ?, ?)`,
		e.ID, e.Type, string(payload), e.Received)
	return true, err
}

func (d *sqlData) ListEvents(ctx context.Context, limit int) ([]Event, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, type, received FROM payment_events ORDER BY seq DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanEvent)
}

func applyAppSchema(ctx context.Context, exec func(context.Context, string) error, dialect string) error {
	for _, stmt := range appSchema[dialect] {
		if err := exec(ctx, stmt); err != nil {
			return fmt.Errorf("app schema: %w", err)
		}
	}
	return nil
}
