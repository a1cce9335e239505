package postgres

// This file is not rendered by idemgen: it holds the HTTP benchmarks'
// PostgreSQL side (the bare handlers' table and statements, and the
// floors), shared by BenchmarkHTTP, BenchmarkHTTPFloor and the external
// load generator (internal/stores/harness/cmd/loadbench).

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plainInsert is the bare handler's statement in the HTTP benchmarks, and
// the handler's write in the pgbench scripts (TestPgbenchScripts).
const plainInsert = "INSERT INTO plain (id, body) VALUES ($1, $2)"

// BenchBackend creates the bare handlers' table "plain" on pool and
// returns the HTTP benchmarks' backend over st and it: the INSERT (in the
// operation's transaction when there is one, transactional mode), and the
// primary-key GET.
func BenchBackend(ctx context.Context, pool *pgxpool.Pool, st *Store) (harness.HTTPBackend, error) {
	if _, err := pool.Exec(ctx, "CREATE TABLE plain (id text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
		return harness.HTTPBackend{}, err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE saved (id text PRIMARY KEY, v bytea NOT NULL, expires_at bigint NOT NULL)"); err != nil {
		return harness.HTTPBackend{}, err
	}
	return harness.HTTPBackend{
		Store: st,
		Insert: func(ctx context.Context, id string, body []byte) error {
			if tx, ok := TxFromContext(ctx); ok {
				_, err := tx.Exec(ctx, plainInsert, id, body)
				return err
			}
			_, err := pool.Exec(ctx, plainInsert, id, body)
			return err
		},
		InsertIn: func(ctx context.Context, tx idemrt.Tx, id string, body []byte) error {
			ptx, ok := tx.Handle().(pgx.Tx)
			if !ok {
				return fmt.Errorf("the store's transaction is a %T, not a pgx.Tx", tx.Handle())
			}
			_, err := ptx.Exec(ctx, plainInsert, id, body)
			return err
		},
		Get: func(ctx context.Context, id string) (body []byte, err error) {
			err = pool.QueryRow(ctx, "SELECT body FROM plain WHERE id = $1", id).Scan(&body)
			return body, err
		},
		Save: func(ctx context.Context, id string, v []byte, expires time.Time) error {
			_, err := pool.Exec(ctx, "INSERT INTO saved (id, v, expires_at) VALUES ($1, $2, $3)", id, v, expires.UnixMilli())
			return err
		},
		GetSaved: func(ctx context.Context, id string, now time.Time) (v []byte, err error) {
			err = pool.QueryRow(ctx, "SELECT v FROM saved WHERE id = $1 AND expires_at > $2", id, now.UnixMilli()).Scan(&v)
			return v, err
		},
	}, nil
}

// acquireOnly is the upsert of the store's claim without its read: the
// INSERT ... ON CONFLICT ... RETURNING of the schema's acquire function
// (idemgen_schema.sql), which Claim and ClaimTx call when their read finds
// no live record, with the function's parameters as $1, $2, ... and no
// INTO: the cheapest claim, for the floors. Its parameters are Claim's:
// scope, principal, key, fingerprint, fingerprint version, lease and TTL
// in milliseconds.
func acquireOnly() (string, error) {
	start := strings.Index(Schema, "    INSERT INTO")
	end := strings.Index(Schema, "RETURNING t.epoch INTO claimed;")
	if start < 0 || end < start {
		return "", errors.New("the schema has no acquire function's upsert to take")
	}
	params := map[string]string{"p_scope": "$1::varchar", "p_principal": "$2::bytea", "p_idem_key": "$3::varchar",
		"p_fingerprint": "$4::bytea", "p_fingerprint_version": "$5::integer", "p_lease_ms": "$6::bigint", "p_ttl_ms": "$7::bigint"}
	var unknown error
	sql := acquireParam.ReplaceAllStringFunc(Schema[start:end], func(p string) string {
		n, ok := params[p]
		if !ok {
			unknown = fmt.Errorf("the acquire function's upsert has a parameter %s that acquireOnly does not know", p)
		}
		return n
	})
	if unknown != nil {
		return "", unknown
	}
	sql += "RETURNING t.epoch"
	return strings.TrimSpace(sql), nil
}

// acquireParam is a parameter of the acquire function, by its name.
var acquireParam = regexp.MustCompile(`\bp_[a-z_]+\b`)

// BenchFloors are handlers that send the fewest statements a first
// request could, with the upsert of the store's own claim (acquireOnly)
// and completion (Complete) and no wrapper, no read first, no advisory lock: what any
// design sending them could reach against the bare INSERT handler
// (docs/performance-log.md). They write through pool, as hb.Insert does.
//
//   - floor-nontx: claim, the handler's INSERT, completion, each committed
//     on its own (3 round trips, 3 commits): the non-transactional floor.
//
//   - floor-tx: BEGIN, claim, INSERT, completion, COMMIT (5 round trips).
//
//   - floor-tx-batched: BEGIN with the claim, the INSERT, the completion
//     with the COMMIT (3 round trips): the fewest a transactional design
//     can send with the handler running between claim and completion.
//
//   - floor-tx-1rt: all five in one round trip, which no implementation
//     can send (the handler runs between the claim and the completion).
//
// (store-tx-batched, the store's read, then BEGIN sent with its ClaimTx,
// the INSERT, CompleteTx with the COMMIT, went when the store itself sent
// BEGIN with its claim, with no read first: harness.StoreFloors' store-tx.)
//
// harness.StoreFloors adds the store's own paths without the wrapper.
func BenchFloors(pool *pgxpool.Pool) ([]harness.HTTPFloor, error) {
	acquire, err := acquireOnly()
	if err != nil {
		return nil, err
	}
	// The completion in the claim's transaction needs no epoch: the
	// transaction holds the row.
	completeAny := strings.Replace(complete, "AND epoch = $9", "AND epoch = epoch", 1)
	if completeAny == complete {
		return nil, errors.New("Complete has no epoch condition to drop")
	}
	f := &floors{pool: pool, acquire: acquire, completeAny: completeAny,
		principal: make([]byte, 32), fingerprint: []byte(strings.Repeat("f", 32)), headers: []byte("Content-Type: application/json")}
	return []harness.HTTPFloor{
		{Name: "floor-nontx", Do: f.nontx},
		{Name: "floor-tx", Do: f.tx},
		{Name: "floor-tx-batched", Do: f.txBatched},
		{Name: "floor-tx-1rt", Do: f.tx1rt},
	}, nil
}

// floors sends BenchFloors' statements.
type floors struct {
	pool                            *pgxpool.Pool
	acquire, completeAny            string
	principal, fingerprint, headers []byte
}

const floorLeaseMs, floorTTLMs = int64(60000), int64(86400000)

func (f *floors) acquireArgs(key string) []any {
	return []any{"createCharge", f.principal, key, f.fingerprint, int32(2), floorLeaseMs, floorTTLMs}
}

func (f *floors) completeArgs(key string, body []byte, epoch int64) []any {
	return []any{int32(201), f.headers, body, false, floorTTLMs, "createCharge", f.principal, key, epoch}
}

func completed(tag pgconn.CommandTag) error {
	if tag.RowsAffected() != 1 {
		return errors.New("the completion matched no record")
	}
	return nil
}

// inConn runs fn on a connection of the pool, rolling back what fn left
// open when it fails.
func (f *floors) inConn(ctx context.Context, fn func(c *pgxpool.Conn) error) error {
	c, err := f.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if err := fn(c); err != nil {
		_, _ = c.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	return nil
}

func (f *floors) nontx(ctx context.Context, key, id string, body []byte) error {
	var epoch int64
	if err := f.pool.QueryRow(ctx, f.acquire, f.acquireArgs(key)...).Scan(&epoch); err != nil {
		return err
	}
	if _, err := f.pool.Exec(ctx, plainInsert, id, body); err != nil {
		return err
	}
	tag, err := f.pool.Exec(ctx, complete, f.completeArgs(key, body, epoch)...)
	if err != nil {
		return err
	}
	return completed(tag)
}

func (f *floors) tx(ctx context.Context, key, id string, body []byte) error {
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var epoch int64
	if err := tx.QueryRow(ctx, f.acquire, f.acquireArgs(key)...).Scan(&epoch); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, plainInsert, id, body); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, complete, f.completeArgs(key, body, epoch)...)
	if err != nil {
		return err
	}
	if err := completed(tag); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (f *floors) txBatched(ctx context.Context, key, id string, body []byte) error {
	return f.inConn(ctx, func(c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("begin")
		b.Queue(f.acquire, f.acquireArgs(key)...)
		br := c.SendBatch(ctx, b)
		_, err := br.Exec()
		var epoch int64
		if err == nil {
			err = br.QueryRow().Scan(&epoch)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if _, err := c.Exec(ctx, plainInsert, id, body); err != nil {
			return err
		}
		b = &pgx.Batch{}
		b.Queue(complete, f.completeArgs(key, body, epoch)...)
		b.Queue("commit")
		return finish(c.SendBatch(ctx, b), 0, completed)
	})
}

func (f *floors) tx1rt(ctx context.Context, key, id string, body []byte) error {
	return f.inConn(ctx, func(c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("begin")
		b.Queue(f.acquire, f.acquireArgs(key)...)
		b.Queue(plainInsert, id, body)
		b.Queue(f.completeAny, f.completeArgs(key, body, 0)[:8]...)
		b.Queue("commit")
		return finish(c.SendBatch(ctx, b), 3, completed)
	})
}

// finish reads a batch ending in a completion and COMMIT: before
// statements, then the completion (checked by check), then the COMMIT.
func finish(br pgx.BatchResults, before int, check func(pgconn.CommandTag) error) error {
	var err error
	for range before {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil {
			err = check(tag)
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = errors.New("the server rolled the transaction back")
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}
