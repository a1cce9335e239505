// Package keystool is `idemgen keys`: inspect, release and purge one
// idempotency record in a PostgreSQL, MySQL/MariaDB, SQLite or Redis store,
// addressed by operation, principal and key, without writing SQL against a
// table whose principal column is a hash.
//
// It lives apart from cmd/idemgen, in the idemgen-keys command, so that
// `go run github.com/idemgen/idemgen/cmd/idemgen generate` (what go:generate
// lines run) builds no database driver (they add about 50 s to a cold
// build, mostly modernc.org/sqlite; see docs/stores.md). `idemgen keys`
// runs idemgen-keys.
package keystool

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/storekit"
	"github.com/idemgen/idemgen/stores/redisstore"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // no such record, or a change refused (fenced, live lease, wrong state)
	exitUsage   = 2
	exitStoreKO = 3 // the store could not be reached or read
)

const usage = `Usage: idemgen keys inspect|release|purge|help -dsn DSN -op OPERATION -key KEY [flags]

Operator tooling for one idempotency record, named by operation (its scope),
principal and key:

  inspect   show the record: state, epoch, created (from the epoch), lease
            and expiry times, status, and the saved response (opened with
            -keys FILE when it is sealed, else withheld). Read-only.
  release   free an in-progress record (a key stuck by a crashed worker), as
            the middleware's release does: the next request with the key
            runs. Fenced by -epoch (required; see inspect): a record that
            moved on is left alone. A record whose lease still runs is
            refused unless -force (its worker may still be running).
  purge     delete a completed record: the next request with the key runs
            again. With -epoch, only that epoch's record.
  help      this text.

DSN: postgres://..., mysql://user@tcp(host:3306)/db, sqlite:FILE,
redis://host:6379 or redis-cluster://host:port,host:port.
The principal is hashed as the middleware hashes it (SHA-256); without
-principal the record is an anonymous operation's. Each change is logged
on stderr. Exit codes: 0 ok, 1 no such record or change refused, 2 usage,
3 the store could not be reached.

Flags:
`

type options struct {
	dsn, table, prefix, op, scope, principal, key, keysFile string
	epoch                                                   int64
	force, json                                             bool
}

func flags(cmd string, stderr io.Writer) (*flag.FlagSet, *options) {
	o := &options{}
	fs := flag.NewFlagSet("idemgen keys "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "the store: postgres://..., mysql://user@tcp(host:3306)/db, sqlite:FILE, redis://host:6379, redis-cluster://...")
	fs.StringVar(&o.table, "table", "idempotency_keys", "the key table (SQL stores; generate's -table)")
	fs.StringVar(&o.prefix, "prefix", redisstore.DefaultPrefix, "the key prefix (Redis; redisstore.Options.Prefix)")
	fs.StringVar(&o.op, "op", "", "the operation (its operationId), whose scope names the record")
	fs.StringVar(&o.scope, "scope", "", "the record's scope, when the annotation sets one other than the operation id")
	fs.StringVar(&o.principal, "principal", "", "the caller, as Options.Principal returns it (hashed here); empty for an anonymous operation")
	fs.StringVar(&o.key, "key", "", "the idempotency key")
	fs.StringVar(&o.keysFile, "keys", "", "a keys file (KEYID:BASE64 lines) to open a sealed response (inspect)")
	fs.Int64Var(&o.epoch, "epoch", 0, "the record's epoch, as inspect shows it (release: required; purge: optional)")
	fs.BoolVar(&o.force, "force", false, "release: also a record whose lease still runs")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of text")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs, o
}

// Run runs `idemgen keys args...` and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fs, _ := flags("help", stdout)
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd := args[0]
	if cmd != "inspect" && cmd != "release" && cmd != "purge" {
		fmt.Fprintf(stderr, "idemgen keys: unknown command %q (inspect, release, purge, help)\n", cmd)
		return exitUsage
	}
	fs, o := flags(cmd, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "idemgen keys %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage
	case o.dsn == "" || (o.op == "" && o.scope == "") || o.key == "":
		fmt.Fprintf(stderr, "idemgen keys %s: want -dsn, -op (or -scope) and -key\n", cmd)
		return exitUsage
	case cmd == "release" && o.epoch == 0:
		fmt.Fprintf(stderr, "idemgen keys release: want -epoch (the record's, from inspect): a release is fenced by it\n")
		return exitUsage
	}
	rk := idemrt.RecordKey{Scope: o.scope, Key: o.key}
	if rk.Scope == "" {
		rk.Scope = o.op
	}
	if o.principal != "" {
		rk.PrincipalHash = idemrt.HashPrincipal(o.principal)
	}
	var ring *idemrt.KeyRing
	if o.keysFile != "" {
		var err error
		if ring, err = idemrt.LoadKeyRing(o.keysFile); err != nil {
			fmt.Fprintf(stderr, "idemgen keys: %v\n", err)
			return exitUsage
		}
	}
	st, err := open(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen keys: %v\n", err)
		return exitUsage
	}
	defer st.close()

	rec, err := st.inspect(ctx, rk)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen keys %s: %s: %v\n", cmd, st.name(), err)
		return exitStoreKO
	}
	if rec == nil {
		report(stdout, o.json, map[string]any{"found": false, "scope": rk.Scope, "principal_sha256": hex.EncodeToString(rk.PrincipalHash[:]), "key": rk.Key},
			fmt.Sprintf("no record for scope %q, principal sha256:%x, key %q (absent, expired and swept, or another -op/-principal/-table)\n", rk.Scope, rk.PrincipalHash[:6], rk.Key))
		return exitFailed
	}
	switch cmd {
	case "inspect":
		v := rec.view(rk, ring)
		report(stdout, o.json, v, v.text())
		return exitOK
	case "release":
		if why := refuseRelease(rec, o); why != "" {
			fmt.Fprintf(stderr, "idemgen keys release: refused: %s\n", why)
			return exitFailed
		}
		n, err := st.release(ctx, rk, o.epoch, o.force)
		return changed(stdout, stderr, o, "release", "released", rk, n, err, st)
	default: // purge
		if rec.state != storekit.StateCompleted {
			fmt.Fprintf(stderr, "idemgen keys purge: refused: the record is %s, not completed (release frees an in-progress record)\n", stateName(rec.state))
			return exitFailed
		}
		if o.epoch != 0 && rec.epoch != o.epoch {
			fmt.Fprintf(stderr, "idemgen keys purge: refused: the record is at epoch %d, not %d\n", rec.epoch, o.epoch)
			return exitFailed
		}
		n, err := st.purge(ctx, rk, rec.epoch)
		return changed(stdout, stderr, o, "purge", "purged", rk, n, err, st)
	}
}

func refuseRelease(rec *record, o *options) string {
	switch {
	case rec.state != storekit.StateInProgress:
		return "the record is " + stateName(rec.state) + ", not in progress (purge deletes a completed record)"
	case rec.epoch != o.epoch:
		return fmt.Sprintf("the record is at epoch %d, not %d: it moved on since you looked", rec.epoch, o.epoch)
	case rec.leaseUntil.After(rec.now) && !o.force:
		return fmt.Sprintf("its lease runs %s more: its worker may still be running; wait, or give -force", rec.leaseUntil.Sub(rec.now).Round(time.Millisecond))
	}
	return ""
}

// changed reports a release or purge: n is the number of records changed
// (0: the record moved on between the read and the write).
func changed(stdout, stderr io.Writer, o *options, cmd, done string, rk idemrt.RecordKey, n int64, err error, st store) int {
	if err != nil {
		fmt.Fprintf(stderr, "idemgen keys %s: %s: %v\n", cmd, st.name(), err)
		return exitStoreKO
	}
	if n == 0 {
		fmt.Fprintf(stderr, "idemgen keys %s: refused: the record changed since it was read (another attempt moved it on); inspect it again\n", cmd)
		return exitFailed
	}
	fmt.Fprintf(stderr, "idemgen keys: %s %s scope=%q principal=sha256:%x key=%q epoch=%d force=%v at %s\n",
		done, st.name(), rk.Scope, rk.PrincipalHash[:6], rk.Key, o.epoch, o.force, time.Now().UTC().Format(time.RFC3339))
	report(stdout, o.json, map[string]any{"action": cmd, "done": true, "scope": rk.Scope, "principal_sha256": hex.EncodeToString(rk.PrincipalHash[:]), "key": rk.Key, "epoch": o.epoch},
		done+"\n")
	return exitOK
}

func report(w io.Writer, asJSON bool, v any, text string) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	fmt.Fprint(w, text)
}

func stateName(s int64) string {
	switch s {
	case storekit.StateInProgress:
		return "in_progress"
	case storekit.StateCompleted:
		return "completed"
	case storekit.StateReleased:
		return "released"
	}
	return "unknown(" + strconv.FormatInt(s, 10) + ")"
}

// record is one record as a store holds it.
type record struct {
	state              int64
	epoch              int64
	fingerprintVersion int64
	leaseUntil         time.Time
	expiresAt          time.Time
	now                time.Time // the store's clock when it was read
	status             int64
	headers, body      []byte
	tombstone          bool
}

// view is what inspect prints.
type view struct {
	Found              bool                `json:"found"`
	Scope              string              `json:"scope"`
	PrincipalSHA256    string              `json:"principal_sha256"`
	Key                string              `json:"key"`
	State              string              `json:"state"`
	Epoch              int64               `json:"epoch"`
	Created            time.Time           `json:"created"`
	LeaseUntil         time.Time           `json:"lease_until"`
	LeaseLive          bool                `json:"lease_live"`
	ExpiresAt          time.Time           `json:"expires_at"`
	StoreNow           time.Time           `json:"store_now"`
	FingerprintVersion int64               `json:"fingerprint_version"`
	Status             int64               `json:"status,omitempty"`
	Tombstone          bool                `json:"tombstone,omitempty"`
	Sealed             bool                `json:"sealed"`
	SealedKeyID        string              `json:"sealed_key_id,omitempty"`
	Withheld           string              `json:"withheld,omitempty"`
	Headers            map[string][]string `json:"headers,omitempty"`
	Body               string              `json:"body,omitempty"`
	BodyBase64         string              `json:"body_base64,omitempty"`
}

func (r *record) view(rk idemrt.RecordKey, ring *idemrt.KeyRing) view {
	v := view{Found: true, Scope: rk.Scope, PrincipalSHA256: hex.EncodeToString(rk.PrincipalHash[:]), Key: rk.Key,
		State: stateName(r.state), Epoch: r.epoch, LeaseUntil: r.leaseUntil.UTC(), ExpiresAt: r.expiresAt.UTC(),
		StoreNow: r.now.UTC(), LeaseLive: r.state == storekit.StateInProgress && r.leaseUntil.After(r.now), FingerprintVersion: r.fingerprintVersion}
	// A fresh record's epoch is the store's clock in microseconds when it
	// was first claimed; a takeover or a claim after a release adds one.
	v.Created = time.UnixMicro(r.epoch).UTC()
	if r.state != storekit.StateCompleted {
		return v
	}
	v.Status, v.Tombstone = r.status, r.tombstone
	if r.tombstone {
		return v
	}
	h, err := storekit.DecodeHeader(r.headers)
	if err != nil {
		v.Withheld = err.Error()
		return v
	}
	resp := &idemrt.SavedResponse{Status: int(r.status), Header: h, Body: r.body}
	if idemrt.IsSealed(resp) {
		v.Sealed = true
		v.SealedKeyID, _ = idemrt.SealedKeyID(resp)
		if ring == nil {
			v.Withheld = "sealed with key " + strconv.Quote(v.SealedKeyID) + "; give -keys FILE to open it"
			return v
		}
		opened, err := ring.Open(rk, r.epoch, resp)
		if err != nil {
			v.Withheld = err.Error()
			return v
		}
		resp = opened
	}
	v.Headers = resp.Header
	if utf8.Valid(resp.Body) {
		v.Body = string(resp.Body)
	} else {
		v.BodyBase64 = base64.StdEncoding.EncodeToString(resp.Body)
	}
	return v
}

func (v view) text() string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.Format("2006-01-02 15:04:05.000 UTC") }
	fmt.Fprintf(&b, "scope      %s\nprincipal  sha256:%s\nkey        %s\n", v.Scope, v.PrincipalSHA256, v.Key)
	fmt.Fprintf(&b, "state      %s\nepoch      %d\ncreated    %s (from the epoch: the first claim)\n", v.State, v.Epoch, ts(v.Created))
	lease := "ended"
	if v.LeaseLive {
		lease = "live, " + v.LeaseUntil.Sub(v.StoreNow).Round(time.Millisecond).String() + " left"
	}
	fmt.Fprintf(&b, "lease      until %s (%s)\nexpires    %s (in %s)\n", ts(v.LeaseUntil), lease, ts(v.ExpiresAt), v.ExpiresAt.Sub(v.StoreNow).Round(time.Second))
	if v.State != "completed" {
		return b.String()
	}
	if v.Tombstone {
		b.WriteString("result     tombstone (too large to save, or not recorded)\n")
		return b.String()
	}
	fmt.Fprintf(&b, "status     %d\n", v.Status)
	if v.Sealed {
		fmt.Fprintf(&b, "sealed     with key %q\n", v.SealedKeyID)
	}
	if v.Withheld != "" {
		fmt.Fprintf(&b, "response   withheld: %s\n", v.Withheld)
		return b.String()
	}
	names := make([]string, 0, len(v.Headers))
	for n := range v.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, val := range v.Headers[n] {
			fmt.Fprintf(&b, "header     %s: %s\n", n, val)
		}
	}
	if v.BodyBase64 != "" {
		fmt.Fprintf(&b, "body       (base64) %s\n", v.BodyBase64)
	} else {
		fmt.Fprintf(&b, "body       %s\n", v.Body)
	}
	return b.String()
}

// store is one kind of store.
type store interface {
	name() string
	inspect(ctx context.Context, rk idemrt.RecordKey) (*record, error)
	release(ctx context.Context, rk idemrt.RecordKey, epoch int64, force bool) (int64, error)
	purge(ctx context.Context, rk idemrt.RecordKey, epoch int64) (int64, error)
	close()
}

// open connects to the store dsn names and checks that it answers; the
// error is one line without the DSN's password.
func open(ctx context.Context, o *options) (store, error) {
	dsn := o.dsn
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err := sql.Open("pgx", dsn)
		return sqlStore(ctx, db, err, pgDialect, o.table, "postgres "+redact(dsn))
	case strings.HasPrefix(dsn, "mysql://"):
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return nil, fmt.Errorf("-dsn: not a MySQL DSN (want mysql://user@tcp(host:3306)/db): %v", err)
		}
		cfg.ParseTime, cfg.Loc = true, time.UTC
		where := "mysql " + cfg.User + "@" + cfg.Net + "(" + cfg.Addr + ")/" + cfg.DBName
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		return sqlStore(ctx, sql.OpenDB(conn), nil, myDialect, o.table, where)
	case strings.HasPrefix(dsn, "sqlite:"):
		file := strings.TrimPrefix(dsn, "sqlite:")
		db, err := sql.Open("sqlite", "file:"+file+"?mode=rw&_pragma=busy_timeout(5000)")
		return sqlStore(ctx, db, err, liteDialect, o.table, "sqlite "+file)
	case strings.HasPrefix(dsn, "redis://"), strings.HasPrefix(dsn, "rediss://"), strings.HasPrefix(dsn, "redis-cluster://"):
		return redisOpen(ctx, dsn, o.prefix)
	}
	return nil, fmt.Errorf("-dsn %q: want postgres://..., mysql://user@tcp(host:3306)/db, sqlite:FILE, redis://host:6379 or redis-cluster://host:port,host:port", redact(dsn))
}

// redact hides a password in a URL-shaped DSN.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
}

// oneLine keeps the first line of an error's text.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// dialect is what differs between the SQL stores.
type dialect struct {
	// now is the database's clock as the stores read it; times says how
	// lease_until and expires_at are kept (SQLite: Unix milliseconds).
	now      string
	millis   bool
	empty    string // an empty bytes literal
	question bool   // ? placeholders (else $1, $2...)
}

var (
	pgDialect   = dialect{now: "statement_timestamp()", empty: `'\x'::bytea`}
	myDialect   = dialect{now: "(UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)", empty: "''", question: true}
	liteDialect = dialect{now: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)", millis: true, empty: "x''", question: true}
)

type sqlDB struct {
	db    *sql.DB
	d     dialect
	table string
	where string
}

func sqlStore(ctx context.Context, db *sql.DB, err error, d dialect, table, where string) (store, error) {
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = db.PingContext(pctx)
		cancel()
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, fmt.Errorf("cannot reach %s: %s", where, oneLine(err))
	}
	for _, c := range table {
		if !(c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			db.Close()
			return nil, fmt.Errorf("-table %q: want letters, digits, '_' and '.'", table)
		}
	}
	return &sqlDB{db: db, d: d, table: table, where: where}, nil
}

func (s *sqlDB) name() string { return s.where }
func (s *sqlDB) close()       { s.db.Close() }

// q numbers the placeholders for PostgreSQL.
func (s *sqlDB) q(query string) string {
	if s.d.question {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

const byKey = "scope = ? AND principal = ? AND idem_key = ?"

func (s *sqlDB) inspect(ctx context.Context, rk idemrt.RecordKey) (*record, error) {
	row := s.db.QueryRowContext(ctx, s.q("SELECT state, epoch, fingerprint_version, lease_until, expires_at, "+s.d.now+
		", status, headers, body, tombstone FROM "+s.table+" WHERE "+byKey), rk.Scope, rk.PrincipalHash[:], rk.Key)
	var r record
	var err error
	if s.d.millis {
		var lease, exp, now int64
		err = row.Scan(&r.state, &r.epoch, &r.fingerprintVersion, &lease, &exp, &now, &r.status, &r.headers, &r.body, &r.tombstone)
		r.leaseUntil, r.expiresAt, r.now = time.UnixMilli(lease), time.UnixMilli(exp), time.UnixMilli(now)
	} else {
		err = row.Scan(&r.state, &r.epoch, &r.fingerprintVersion, &r.leaseUntil, &r.expiresAt, &r.now, &r.status, &r.headers, &r.body, &r.tombstone)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.New(oneLine(err))
	}
	return &r, nil
}

func (s *sqlDB) release(ctx context.Context, rk idemrt.RecordKey, epoch int64, force bool) (int64, error) {
	q := "UPDATE " + s.table + " SET state = 3, lease_until = " + s.d.now + ", headers = " + s.d.empty + ", body = " + s.d.empty +
		" WHERE " + byKey + " AND epoch = ? AND state = 1"
	if !force {
		q += " AND lease_until <= " + s.d.now
	}
	return s.exec(ctx, q, rk.Scope, rk.PrincipalHash[:], rk.Key, epoch)
}

func (s *sqlDB) purge(ctx context.Context, rk idemrt.RecordKey, epoch int64) (int64, error) {
	return s.exec(ctx, "DELETE FROM "+s.table+" WHERE "+byKey+" AND epoch = ? AND state = 2", rk.Scope, rk.PrincipalHash[:], rk.Key, epoch)
}

func (s *sqlDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return 0, errors.New(oneLine(err))
	}
	return res.RowsAffected()
}

// redisDB is a redisstore's records: one hash per record (fields s state,
// e epoch, v fingerprint version, l lease end in Unix ms, c status, h
// headers, b body, t tombstone), expiring by PEXPIRE.
type redisDB struct {
	c     redis.UniversalClient
	st    *redisstore.Store
	where string
}

func redisOpen(ctx context.Context, dsn, prefix string) (store, error) {
	where := "redis " + redact(dsn)
	c, err := redisstore.NewClient(dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %s", oneLine(err))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot reach %s: %s", where, oneLine(err))
	}
	// The store names records (its Key); it is not otherwise used.
	st, err := redisstore.New(pctx, c, redisstore.Options{Prefix: prefix})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %s", where, oneLine(err))
	}
	return &redisDB{c: c, st: st, where: where}, nil
}

func (r *redisDB) name() string { return r.where }
func (r *redisDB) close()       { r.c.Close() }

var inspectScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), now}
`)

func (r *redisDB) inspect(ctx context.Context, rk idemrt.RecordKey) (*record, error) {
	v, err := inspectScript.Run(ctx, r.c, []string{r.st.Key(rk)}).Slice()
	if err != nil {
		return nil, errors.New(oneLine(err))
	}
	if len(v) != 3 {
		return nil, errors.New("unexpected reply from the inspect script")
	}
	fields, _ := v[0].([]any)
	if len(fields) == 0 {
		return nil, nil
	}
	ttl, _ := v[1].(int64)
	nowMs, _ := v[2].(int64)
	m := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		m[k] = val
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	rec := &record{state: num("s"), epoch: num("e"), fingerprintVersion: num("v"), status: num("c"),
		headers: []byte(m["h"]), body: []byte(m["b"]), tombstone: m["t"] == "1",
		leaseUntil: time.UnixMilli(num("l")), now: time.UnixMilli(nowMs)}
	if ttl >= 0 {
		rec.expiresAt = rec.now.Add(time.Duration(ttl) * time.Millisecond)
	}
	return rec, nil
}

// releaseScript frees the in-progress record at ARGV[1] (with a live lease
// only when ARGV[2] is 1), as the store's release does.
var releaseScript = redis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 's', 'e', 'l')
if r[1] ~= '1' or tonumber(r[2]) ~= tonumber(ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] ~= '1' and tonumber(r[3]) > now then return 0 end
redis.call('HSET', KEYS[1], 's', '3')
redis.call('HDEL', KEYS[1], 'c', 'h', 'b', 't')
return 1
`)

var purgeScript = redis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 's', 'e')
if r[1] ~= '2' or tonumber(r[2]) ~= tonumber(ARGV[1]) then return 0 end
return redis.call('DEL', KEYS[1])
`)

func (r *redisDB) release(ctx context.Context, rk idemrt.RecordKey, epoch int64, force bool) (int64, error) {
	f := "0"
	if force {
		f = "1"
	}
	n, err := releaseScript.Run(ctx, r.c, []string{r.st.Key(rk)}, strconv.FormatInt(epoch, 10), f).Int64()
	if err != nil {
		return 0, errors.New(oneLine(err))
	}
	return n, nil
}

func (r *redisDB) purge(ctx context.Context, rk idemrt.RecordKey, epoch int64) (int64, error) {
	n, err := purgeScript.Run(ctx, r.c, []string{r.st.Key(rk)}, strconv.FormatInt(epoch, 10)).Int64()
	if err != nil {
		return 0, errors.New(oneLine(err))
	}
	return n, nil
}
