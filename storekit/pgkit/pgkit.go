// Package pgkit is the part of idemgen's generated PostgreSQL stores that
// does not depend on the spec or on sqlc's generated types: the
// transactional claim sent with BEGIN in one round trip (BeginClaim), the
// reading of its outcome, the read sent with the ROLLBACK of a claim that
// did not acquire its key (AfterRollback), the advisory lock of a key
// (LockKey) and the completion sent with the COMMIT (CommitWith).
//
// Like storekit, it is for generated code: its API is storekit's
// (SupportPackageIsVersion), and nothing here reads the application's
// clock. It imports the runtime, the standard library and pgx, which a
// PostgreSQL store imports anyway.
package pgkit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ClaimTx is a store's transactional claim statement (sqlc's ClaimTx): its
// SQL, the name it is prepared under on each connection, and whether it
// is sent whole (Inline) instead of as an EXECUTE of it prepared.
type ClaimTx struct {
	Name   string
	SQL    string
	Inline bool
}

// Outcome is what a transactional claim reported.
type Outcome struct {
	Kind  string // "acquired", "takeover", "held" or "live"
	Epoch int64  // of "acquired" and "takeover"
}

// ClaimTxBegin starts the begin query of BeginClaim, which names it as
// ClaimTx's round trip for pgx's tracers.
const ClaimTxBegin = "-- name: ClaimTx :one\nBEGIN;\n"

// BeginClaim begins a transaction on conn whose begin query runs c after
// BEGIN, in one round trip, and returns it with c's outcome. params builds
// c's sqlc params struct (whose fields follow c's parameters, $1, $2, ...)
// with the given tag. Its fields are written into the query as literals (a
// simple-protocol query takes no parameters), so that nothing in them is
// read as SQL: numbers; bytes as a hex bytea literal ('\x...'); text
// quoted, its quotes doubled, as pgx quotes a simple-protocol argument
// (pgconn's EscapeString: safe on a session with standard_conforming_strings
// on and client_encoding UTF8), or, on a session without them or for text
// that is not valid UTF-8 or holds a NUL byte, spelled in hex and decoded
// by the server (see literals). With pgx's statement
// cache (its default QueryExecModeCacheStatement) the query EXECUTEs c
// prepared on the connection, so that the server reuses its plan; with
// another mode (the one for pgbouncer's transaction pooling, which keeps
// no prepared statements for a client) it carries the whole statement
// (c.Inline), planned each time.
//
// The outcome comes back as the end of application_name, which the server
// reports to the client when c changes it, after a random tag; a
// connection pooler that does not pass the report on costs one read of
// the setting. The transaction of an outcome other than "acquired" or
// "takeover" is left open: the caller rolls it back (see AfterRollback).
func BeginClaim(ctx context.Context, conn *pgxpool.Conn, c ClaimTx, params func(tag string) any) (pgx.Tx, Outcome, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, Outcome{}, fmt.Errorf("idempotency store: begin: %w", err)
	}
	tag := "idemgen:" + hex.EncodeToString(nonce[:]) + ":"
	_, escErr := conn.Conn().PgConn().EscapeString("")
	args, err := literals(params(tag), escErr == nil)
	if err != nil {
		return nil, Outcome{}, err
	}
	var begin string
	if c.Inline {
		begin = ClaimTxBegin + paramRef.ReplaceAllStringFunc(c.SQL, func(m string) string {
			n, _ := strconv.Atoi(m[1:])
			return args[n-1]
		})
	} else {
		if _, err := conn.Conn().Prepare(ctx, c.Name, c.SQL); err != nil {
			return nil, Outcome{}, fmt.Errorf("idempotency store: begin: preparing the claim: %w", err)
		}
		begin = ClaimTxBegin + "EXECUTE " + c.Name + "(" + strings.Join(args, ", ") + ")"
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	if err != nil {
		pc := conn.Conn().PgConn()
		if !pc.IsClosed() && pc.TxStatus() != 'I' {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "26000" {
			// The session lost the prepared claim (a DISCARD ALL): the
			// next claim on this connection prepares it again.
			_ = conn.Conn().Deallocate(context.WithoutCancel(ctx), c.Name)
		}
		return nil, Outcome{}, fmt.Errorf("idempotency store: begin and claim: %w", err)
	}
	outcome, err := readOutcome(ctx, conn, tx, tag)
	if err == nil {
		var o Outcome
		if o, err = parseOutcome(outcome); err == nil {
			return tx, o, nil
		}
	}
	_ = tx.Rollback(context.WithoutCancel(ctx))
	return nil, Outcome{}, err
}

// readOutcome reads the claim's outcome from the end of application_name
// after tag: as the server reported it, or else read in tx.
func readOutcome(ctx context.Context, conn *pgxpool.Conn, tx pgx.Tx, tag string) (string, error) {
	name := conn.Conn().PgConn().ParameterStatus("application_name")
	if _, outcome, ok := strings.Cut(name, tag); ok {
		return outcome, nil
	}
	if err := tx.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name); err != nil {
		return "", fmt.Errorf("idempotency store: claim: reading its outcome: %w", err)
	}
	if _, outcome, ok := strings.Cut(name, tag); ok {
		return outcome, nil
	}
	return "", errors.New("idempotency store: claim: the transaction's application_name does not carry the claim's outcome")
}

// parseOutcome reads "acquired EPOCH", "takeover EPOCH", "held" or "live".
func parseOutcome(s string) (Outcome, error) {
	kind, epochText, _ := strings.Cut(s, " ")
	switch kind {
	case "acquired", "takeover":
		epoch, err := strconv.ParseInt(epochText, 10, 64)
		if err != nil {
			break
		}
		return Outcome{Kind: kind, Epoch: epoch}, nil
	case "held", "live":
		return Outcome{Kind: kind}, nil
	}
	return Outcome{}, fmt.Errorf("idempotency store: claim: the claim reported %q", s)
}

// paramRef is a parameter ($1, $2, ...) of a statement.
var paramRef = regexp.MustCompile(`\$[0-9]+`)

// literals writes the fields of p, a sqlc params struct, as SQL literals.
// quoted says that the session reads a quoted string as written
// (standard_conforming_strings on, client_encoding UTF8): text and bytes
// are then plain quoted constants, which the server takes in as they are;
// otherwise, and for text that a quoted constant cannot carry (not valid
// UTF-8, or a NUL byte, which would end the query message), they are
// spelled in hex and decoded by the server: function calls that it plans
// and runs on every claim (the hex form everywhere cost the server about
// an eighth of a transactional first request's work: docs/performance-log.md,
// "PostgreSQL: the transactional claim's server cost").
func literals(p any, quoted bool) ([]string, error) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("idempotency store: claim: the claim's parameters are a %T, not a struct", p)
	}
	out := make([]string, v.NumField())
	for i := range out {
		switch f := v.Field(i).Interface().(type) {
		case string:
			out[i] = textLiteral(f, quoted)
		case []byte:
			out[i] = bytesLiteral(f, quoted)
		case int64:
			out[i] = intLiteral(f)
		case int32:
			out[i] = intLiteral(int64(f))
		default:
			return nil, fmt.Errorf("idempotency store: claim: no SQL literal for a %T", f)
		}
	}
	return out, nil
}

func intLiteral(n int64) string { return "(" + strconv.FormatInt(n, 10) + ")" }

func bytesLiteral(b []byte, quoted bool) string {
	if quoted {
		return `'\x` + hex.EncodeToString(b) + `'`
	}
	return "decode('" + hex.EncodeToString(b) + "', 'hex')"
}

func textLiteral(s string, quoted bool) string {
	if quoted && utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "convert_from(" + bytesLiteral([]byte(s), false) + ", 'UTF8')"
}

// AfterRollback runs a statement after the ROLLBACK of the connection's
// transaction, in one round trip (a batch), for a sqlc method: only
// QueryRow is used.
type AfterRollback struct{ Conn *pgxpool.Conn }

// QueryRow sends the ROLLBACK and sql in one batch and returns sql's row.
func (a AfterRollback) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue("rollback")
	b.Queue(sql, args...)
	br := a.Conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errRow{err}
	}
	return batchRow{br}
}

// Exec is not supported.
func (a AfterRollback) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("idempotency store: AfterRollback runs QueryRow only")
}

// Query is not supported.
func (a AfterRollback) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("idempotency store: AfterRollback runs QueryRow only")
}

// batchRow is the last row of a batch: Scan reads it and closes the batch.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// LockKey is the advisory lock of a key: the first 8 bytes of SHA-256 over
// scope, principal hash and key.
func LockKey(k idemrt.RecordKey) int64 {
	h := sha256.New()
	h.Write([]byte(k.Scope))
	h.Write([]byte{0})
	h.Write(k.PrincipalHash[:])
	h.Write([]byte(k.Key))
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])))
}

// CommitWith sends sql (a completion that returns one row) and the COMMIT
// of tx together, in one round trip. Should the statement fail, or the
// server not commit, it returns an error; the caller then rolls back.
func CommitWith(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("commit")
	br := tx.SendBatch(ctx, b)
	var completed int32
	err := br.QueryRow().Scan(&completed)
	tag, cerr := br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = cerr
	}
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("the server rolled the transaction back")
	}
	return err
}
