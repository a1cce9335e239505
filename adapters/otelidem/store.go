package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// Store calls, the values of the idempotency.store.call attribute.
const (
	CallClaim      = "claim"
	CallComplete   = "complete"
	CallRelease    = "release"
	CallSweep      = "sweep"
	CallBeginTx    = "begin_tx"
	CallTxComplete = "tx_complete"
	CallCommit     = "commit"
	CallRollback   = "rollback"
)

// Store returns s with every call timed in idempotency.store.duration. The
// result is an idemrt.TxStore when s is one, so transactional operations
// keep working. Keep using s itself for anything else it offers (its typed
// transaction accessor, migrations).
func (m *Metrics) Store(s idemrt.Store) idemrt.Store {
	t := timedStore{s: s, m: m}
	if txs, ok := s.(idemrt.TxStore); ok {
		return timedTxStore{timedStore: t, txs: txs}
	}
	return t
}

func (m *Metrics) observe(ctx context.Context, call attribute.KeyValue, start time.Time, err error) {
	d := time.Since(start).Seconds()
	if err != nil {
		m.duration.Record(ctx, d, metric.WithAttributes(call, keyErrorType.String(errorType(err))))
		return
	}
	m.duration.Record(ctx, d, metric.WithAttributes(call))
}

var (
	attrClaim      = keyStoreCall.String(CallClaim)
	attrComplete   = keyStoreCall.String(CallComplete)
	attrRelease    = keyStoreCall.String(CallRelease)
	attrSweep      = keyStoreCall.String(CallSweep)
	attrBeginTx    = keyStoreCall.String(CallBeginTx)
	attrTxComplete = keyStoreCall.String(CallTxComplete)
	attrCommit     = keyStoreCall.String(CallCommit)
	attrRollback   = keyStoreCall.String(CallRollback)
)

type timedStore struct {
	s idemrt.Store
	m *Metrics
}

func (t timedStore) Claim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.ClaimResult, error) {
	start := time.Now()
	res, err := t.s.Claim(ctx, req)
	t.m.observe(ctx, attrClaim, start, err)
	return res, err
}

func (t timedStore) Complete(ctx context.Context, c idemrt.Completion) error {
	start := time.Now()
	err := t.s.Complete(ctx, c)
	t.m.observe(ctx, attrComplete, start, err)
	return err
}

func (t timedStore) Release(ctx context.Context, key idemrt.RecordKey, epoch int64) error {
	start := time.Now()
	err := t.s.Release(ctx, key, epoch)
	t.m.observe(ctx, attrRelease, start, err)
	return err
}

func (t timedStore) Sweep(ctx context.Context, limit int) (int, error) {
	start := time.Now()
	n, err := t.s.Sweep(ctx, limit)
	t.m.observe(ctx, attrSweep, start, err)
	return n, err
}

type timedTxStore struct {
	timedStore
	txs idemrt.TxStore
}

func (t timedTxStore) BeginTx(ctx context.Context) (idemrt.Tx, error) {
	start := time.Now()
	tx, err := t.txs.BeginTx(ctx)
	t.m.observe(ctx, attrBeginTx, start, err)
	if err != nil {
		return tx, err
	}
	return timedTx{tx: tx, m: t.m}, nil
}

type timedTx struct {
	tx idemrt.Tx
	m  *Metrics
}

// Handle returns the driver's transaction unchanged, so that generated
// typed accessors (which assert its type) keep working.
func (t timedTx) Handle() any { return t.tx.Handle() }

func (t timedTx) Complete(ctx context.Context, c idemrt.Completion) error {
	start := time.Now()
	err := t.tx.Complete(ctx, c)
	t.m.observe(ctx, attrTxComplete, start, err)
	return err
}

func (t timedTx) Commit(ctx context.Context) error {
	start := time.Now()
	err := t.tx.Commit(ctx)
	t.m.observe(ctx, attrCommit, start, err)
	return err
}

func (t timedTx) Rollback(ctx context.Context) error {
	start := time.Now()
	err := t.tx.Rollback(ctx)
	t.m.observe(ctx, attrRollback, start, err)
	return err
}
