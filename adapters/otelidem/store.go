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
	CallBeginClaim = "begin_claim"
	CallTxComplete = "tx_complete"
	CallCommit     = "commit"
	CallRollback   = "rollback"
)

// Store returns s with every call timed in idempotency.store.duration. The
// result implements the same optional interfaces of the runtime as s: an
// idemrt.TxStore stays one (transactional operations keep working), and an
// idemrt.ClaimTxStore stays one (they keep committing once, through
// BeginClaim). Transactions keep the driver's handle, so the generated
// typed accessors and MarkProcessed work on them. Keep using s itself for
// anything else it offers (migrations, Sweep loops of its own).
func (m *Metrics) Store(s idemrt.Store) idemrt.Store {
	t := timedStore{s: s, m: m}
	txs, ok := s.(idemrt.TxStore)
	if !ok {
		return t
	}
	tt := timedTxStore{timedStore: t, txs: txs}
	if cs, ok := s.(idemrt.ClaimTxStore); ok {
		return timedClaimTxStore{timedTxStore: tt, cs: cs}
	}
	return tt
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
	attrBeginClaim = keyStoreCall.String(CallBeginClaim)
	attrTxComplete = keyStoreCall.String(CallTxComplete)
	attrCommit     = keyStoreCall.String(CallCommit)
	attrRollback   = keyStoreCall.String(CallRollback)
)

type timedStore struct {
	s idemrt.Store
	m *Metrics
}

// StoreIdentity is s's (idemrt.StoreIdentifier), so that the runtime knows
// the timed store and s, or two timed stores of s, for one store; "" when s
// has none.
func (t timedStore) StoreIdentity() string {
	if si, ok := t.s.(idemrt.StoreIdentifier); ok {
		return si.StoreIdentity()
	}
	return ""
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

type timedClaimTxStore struct {
	timedTxStore
	cs idemrt.ClaimTxStore
}

func (t timedClaimTxStore) BeginClaim(ctx context.Context, req idemrt.ClaimRequest) (idemrt.Tx, idemrt.ClaimResult, error) {
	start := time.Now()
	tx, res, err := t.cs.BeginClaim(ctx, req)
	t.m.observe(ctx, attrBeginClaim, start, err)
	if tx == nil {
		return tx, res, err
	}
	return timedTx{tx: tx, m: t.m}, res, err
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
