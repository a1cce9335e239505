package keystool_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/idemgen/idemgen/cmd/idemgen-keys/internal/keystool"
	"github.com/idemgen/idemgen/internal/stores/harness"
	idemmysql "github.com/idemgen/idemgen/internal/stores/mysql"
	idempg "github.com/idemgen/idemgen/internal/stores/postgres"
	idemsqlite "github.com/idemgen/idemgen/internal/stores/sqlite"
	"github.com/idemgen/idemgen/internal/testutil"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

const secret = "cus_keys_tool_91ab"

func randName() string {
	var b [6]byte
	rand.Read(b[:])
	return "idemgen_keys_" + hex.EncodeToString(b[:])
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := keystool.Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPostgres(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	ctx := context.Background()
	schema := randName()
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := idempg.ApplySchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st, err := idempg.NewStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	scenario(t, st, dsn, schema+".idempotency_keys")
	bad := strings.Replace(dsn, "postgres@", "postgres:hunter2pw@", 1)
	bad = strings.Replace(bad, ":5432", ":1", 1)
	wantOneLine(t, bad, "hunter2pw")
}

func TestMySQL(t *testing.T) {
	base, err := mysql.ParseDSN(testutil.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := randName()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE "+name) })
	base.DBName = name
	db, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := idemmysql.ApplySchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := idemmysql.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	scenario(t, st, "mysql://"+base.FormatDSN(), "idempotency_keys")
	wantOneLine(t, "mysql://root:hunter2pw@tcp(127.0.0.1:1)/x", "hunter2pw")
}

func TestSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := idemsqlite.ApplySchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := idemsqlite.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	scenario(t, st, "sqlite:"+path, "idempotency_keys")
	wantOneLine(t, "sqlite:"+filepath.Join(t.TempDir(), "missing.db"), "")
}

func TestRedis(t *testing.T) {
	srv := harness.StartRedis(t)
	dsn := "redis://" + srv.Addr()
	c, err := redisstore.NewClient(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := redisstore.New(context.Background(), c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	scenario(t, st, dsn, "")
	wantOneLine(t, "redis://:hunter2pw@127.0.0.1:1", "hunter2pw")
}

// wantOneLine: a DSN that cannot be reached is one line, exit 2, and no
// password.
func wantOneLine(t *testing.T, dsn, password string) {
	t.Helper()
	code, out, errs := run(t, "inspect", "-dsn", dsn, "-op", "x", "-key", "k")
	if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "idemgen keys:") {
		t.Fatalf("bad DSN: exit %d, stdout %q, stderr %q; want 2 and one line", code, out, errs)
	}
	if password != "" && strings.Contains(errs, password) {
		t.Fatalf("the error shows the password: %q", errs)
	}
}

func keysFile(t *testing.T) (string, *idemrt.KeyRing) {
	t.Helper()
	line := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kr, err := idemrt.LoadKeyRing(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, kr
}

// scenario writes records through the store as the middleware does, then
// inspects, releases and purges them with the tool.
func scenario(t *testing.T, st idemrt.Store, dsn, table string) {
	ctx := context.Background()
	kfile, kr := keysFile(t)
	common := func(key string, extra ...string) []string {
		a := []string{"-dsn", dsn, "-op", "createCharge", "-principal", "acct_1", "-key", key}
		if table != "" {
			a = append(a, "-table", table)
		}
		return append(a, extra...)
	}
	rk := func(key string) idemrt.RecordKey {
		return idemrt.RecordKey{Scope: "createCharge", PrincipalHash: idemrt.HashPrincipal("acct_1"), Key: key}
	}
	claim := func(key string, lease time.Duration) idemrt.ClaimResult {
		res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: rk(key), FingerprintVersion: idemrt.FingerprintVersion, Lease: lease, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// A completed record, sealed; one in progress with a live lease; one
	// whose lease ended.
	done := claim("done", time.Hour)
	sealed, err := kr.Seal(rk("done"), done.Epoch, &idemrt.SavedResponse{Status: 201, Header: http.Header{"Location": {"/v1/charges/ch_1"}}, Body: []byte(`{"customer":"` + secret + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, idemrt.Completion{RecordKey: rk("done"), Epoch: done.Epoch, Response: sealed, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	stuck := claim("stuck", time.Hour)
	crashed := claim("crashed", 50*time.Millisecond)
	time.Sleep(150 * time.Millisecond)

	code, out, errs := run(t, append([]string{"inspect"}, common("done")...)...)
	if code != 0 || !strings.Contains(out, "state      completed") || !strings.Contains(out, "status     201") ||
		!strings.Contains(out, "withheld") || strings.Contains(out, secret) || !strings.Contains(out, "epoch      "+strconv.FormatInt(done.Epoch, 10)) {
		t.Fatalf("inspect without keys: %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, append([]string{"inspect"}, common("done", "-keys", kfile)...)...)
	if code != 0 || !strings.Contains(out, secret) || !strings.Contains(out, "header     Location: /v1/charges/ch_1") {
		t.Fatalf("inspect with keys: %d\n%s", code, out)
	}
	code, out, _ = run(t, append([]string{"inspect"}, common("done", "-keys", kfile, "-json")...)...)
	var v struct {
		State   string
		Epoch   int64
		Status  int
		Body    string
		Sealed  bool
		Created time.Time
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.State != "completed" || v.Epoch != done.Epoch || v.Status != 201 ||
		!v.Sealed || !strings.Contains(v.Body, secret) || time.Since(v.Created) > time.Hour {
		t.Fatalf("inspect -json: %d %v %+v\n%s", code, err, v, out)
	}
	code, out, _ = run(t, append([]string{"inspect"}, common("stuck")...)...)
	if code != 0 || !strings.Contains(out, "state      in_progress") || !strings.Contains(out, "live") {
		t.Fatalf("inspect in progress: %d\n%s", code, out)
	}
	// Another principal's record of the same key is another record.
	code, out, _ = run(t, "inspect", "-dsn", dsn, "-op", "createCharge", "-principal", "acct_2", "-key", "done", "-table", orDefault(table))
	if code != 1 || !strings.Contains(out, "no record") {
		t.Fatalf("inspect of another principal: %d\n%s", code, out)
	}

	// release: fenced by epoch, refuses a live lease unless forced.
	ep := func(r idemrt.ClaimResult) string { return strconv.FormatInt(r.Epoch, 10) }
	if code, _, errs := run(t, append([]string{"release"}, common("stuck", "-epoch", strconv.FormatInt(stuck.Epoch+7, 10))...)...); code != 1 || !strings.Contains(errs, "not "+strconv.FormatInt(stuck.Epoch+7, 10)) {
		t.Fatalf("release at a wrong epoch: %d %s", code, errs)
	}
	if code, _, errs := run(t, append([]string{"release"}, common("stuck", "-epoch", ep(stuck))...)...); code != 1 || !strings.Contains(errs, "lease runs") {
		t.Fatalf("release of a live lease: %d %s", code, errs)
	}
	if res := claim("stuck", time.Hour); res.State != idemrt.InProgress {
		t.Fatalf("after a refused release the key is %v, want still in progress", res.State)
	}
	if code, out, errs := run(t, append([]string{"release"}, common("stuck", "-epoch", ep(stuck), "-force")...)...); code != 0 || !strings.Contains(errs, "released") || !strings.Contains(out, "released") {
		t.Fatalf("release -force: %d %s %s", code, out, errs)
	}
	if res := claim("stuck", time.Hour); res.State != idemrt.Acquired || res.Epoch <= stuck.Epoch {
		t.Fatalf("after release the key is %v at %d, want acquired after epoch %d", res.State, res.Epoch, stuck.Epoch)
	}
	if code, _, errs := run(t, append([]string{"release"}, common("crashed", "-epoch", ep(crashed))...)...); code != 0 || !strings.Contains(errs, "released") {
		t.Fatalf("release of an ended lease: %d %s", code, errs)
	}
	if code, _, errs := run(t, append([]string{"release"}, common("done", "-epoch", ep(done))...)...); code != 1 || !strings.Contains(errs, "not in progress") {
		t.Fatalf("release of a completed record: %d %s", code, errs)
	}

	// purge deletes a completed record only.
	if code, _, errs := run(t, append([]string{"purge"}, common("stuck")...)...); code != 1 || !strings.Contains(errs, "not completed") {
		t.Fatalf("purge of an in-progress record: %d %s", code, errs)
	}
	if code, out, errs := run(t, append([]string{"purge"}, common("done", "-json")...)...); code != 0 || !strings.Contains(out, `"done": true`) || !strings.Contains(errs, "purged") {
		t.Fatalf("purge: %d %s %s", code, out, errs)
	}
	if code, out, _ := run(t, append([]string{"inspect"}, common("done")...)...); code != 1 || !strings.Contains(out, "no record") {
		t.Fatalf("inspect after purge: %d %s", code, out)
	}
	if res := claim("done", time.Hour); res.State != idemrt.Acquired {
		t.Fatalf("after purge the key is %v, want acquired", res.State)
	}
}

func orDefault(table string) string {
	if table == "" {
		return "idempotency_keys"
	}
	return table
}

func TestUsage(t *testing.T) {
	if code, out, _ := run(t, "help"); code != 0 || !strings.Contains(out, "inspect") || !strings.Contains(out, "release") || !strings.Contains(out, "purge") {
		t.Fatalf("help: %d %s", code, out)
	}
	if code, _, errs := run(t, "drop"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, errs)
	}
	if code, _, errs := run(t, "release", "-dsn", "sqlite:x", "-op", "a", "-key", "k"); code != 2 || !strings.Contains(errs, "-epoch") {
		t.Fatalf("release without -epoch: %d %s", code, errs)
	}
	if code, _, errs := run(t, "inspect", "-dsn", "oracle://scott:tiger@db", "-op", "a", "-key", "k"); code != 2 || strings.Contains(errs, "tiger") {
		t.Fatalf("unknown scheme: %d %s", code, errs)
	}
}
