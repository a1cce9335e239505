package main

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// pgData is the dataStore on PostgreSQL through pgx.
type pgData struct {
	pool          *pgxpool.Pool
	txFrom        func(context.Context) (pgx.Tx, bool)
	markProcessed func(ctx context.Context, tx pgx.Tx, consumer, messageID string) (bool, error)
	// addEvents writes outbox events in tx (the generated AddEvents).
	addEvents func(ctx context.Context, tx pgx.Tx, events ...idemrt.OutboxEvent) error
}

func (d *pgData) tx(ctx context.Context) (pgx.Tx, error) {
	tx, ok := d.txFrom(ctx)
	if !ok || tx == nil {
		return nil, errNoTx
	}
	return tx, nil
}

func (d *pgData) InsertCharge(ctx context.Context, account string, c Charge) error {
	tx, err := d.tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx,
		`INSERT INTO charges (id, account, amount, currency, customer, description, amount_refunded, created) VALUES ($1, $2, $3, $4, $5, $6, 0, $7)`,
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

func (d *pgData) ListCharges(ctx context.Context, account string, limit int) ([]Charge, error) {
	rows, err := d.pool.Query(ctx, `SELECT `+chargeColumns+` FROM charges WHERE account = $1 ORDER BY seq DESC LIMIT $2`, account, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanCharge)
}

func (d *pgData) GetCharge(ctx context.Context, account, id string) (Charge, error) {
	c, err := scanCharge(d.pool.QueryRow(ctx, `SELECT `+chargeColumns+` FROM charges WHERE account = $1 AND id = $2`, account, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, errNotFound
	}
	return c, err
}

func (d *pgData) InsertRefund(ctx context.Context, account string, r Refund) error {
	tx, err := d.tx(ctx)
	if err != nil {
		return err
	}
	var currency string
	err = tx.QueryRow(ctx,
		`UPDATE charges SET amount_refunded = amount_refunded + $1 WHERE account = $2 AND id = $3 AND amount_refunded + $1 <= amount RETURNING currency`,
		r.Amount, account, r.Charge).Scan(&currency)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM charges WHERE account = $1 AND id = $2`, account, r.Charge).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		return errRefundTooLarge
	case err != nil:
		return err
	}
	_, err = tx.Exec(ctx,
		`INSERT INTO refunds (id, account, charge, amount, reason, created) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ID, account, r.Charge, r.Amount, r.Reason, r.Created)
	if err != nil {
		return err
	}
	ev, err := refundCreated(account, currency, r)
	if err != nil {
		return err
	}
	return d.addEvents(ctx, tx, ev)
}

func (d *pgData) PutCustomer(ctx context.Context, account string, c Customer) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO customers (account, id, name, email) VALUES ($1, $2, $3, $4)
		ON CONFLICT (account, id) DO UPDATE SET name = excluded.name, email = excluded.email`,
		account, c.ID, c.Name, c.Email)
	return err
}

func (d *pgData) PutOrder(ctx context.Context, account string, o Order) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO orders (account, id, customer, amount, currency, deleted_at) VALUES ($1, $2, $3, $4, $5, NULL)
		ON CONFLICT (account, id) DO UPDATE SET customer = excluded.customer, amount = excluded.amount,
		currency = excluded.currency, deleted_at = NULL`,
		account, o.ID, o.Customer, o.Amount, o.Currency)
	return err
}

func (d *pgData) DeleteOrder(ctx context.Context, account, id string) error {
	tag, err := d.pool.Exec(ctx, `UPDATE orders SET deleted_at = $1 WHERE account = $2 AND id = $3 AND deleted_at IS NULL`, now(), account, id)
	if err != nil || tag.RowsAffected() > 0 {
		return err
	}
	var one int
	err = d.pool.QueryRow(ctx, `SELECT 1 FROM orders WHERE account = $1 AND id = $2`, account, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotFound
	}
	return err // nil: it was deleted before, which is success
}

func (d *pgData) RecordEvent(ctx context.Context, e Event, payload []byte) (bool, error) {
	tx, err := d.tx(ctx)
	if err != nil {
		return false, err
	}
	first, err := d.markProcessed(ctx, tx, "payment-events", e.ID)
	if err != nil || !first {
		return first, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO payment_events (id, type, payload, received) VALUES ($1, $2, $3, $4)`,
		e.ID, e.Type, string(payload), e.Received)
	return true, err
}

func (d *pgData) ListEvents(ctx context.Context, limit int) ([]Event, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, type, received FROM payment_events ORDER BY seq DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collect(rows, scanEvent)
}
