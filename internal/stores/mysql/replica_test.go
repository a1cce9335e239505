package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/stores/harness"
)

// TestReadOnlyRefused shows CONTRACT §4 on a real read-only server (the
// shared test server is writable and is not touched): a private MariaDB
// started with --read-only=ON is refused by NewStore naming @@read_only;
// after SET GLOBAL read_only=OFF on that server the same pool is accepted and
// a claim is acquired; restarted with --innodb-read-only it is refused
// naming @@innodb_read_only. MariaDB has no super_read_only (a MySQL 5.7+
// variable): the test checks that it is absent, so that it would notice a
// server that has it. It starts its own server, so it runs only with
// IDEMGEN_TEST_REPLICAS set.
func TestReadOnlyRefused(t *testing.T) {
	harness.RequireReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	srv := harness.StartMariaDB(t, "--read-only=ON")
	t.Logf("server installed and started read-only in %s", time.Since(start).Round(time.Millisecond))

	admin := openDB(t, srv.DSN(""))
	vars := readOnlyVars(t, admin)
	if vars["read_only"] != "ON" {
		t.Fatalf("the server started with --read-only=ON has %v: the test proves nothing", vars)
	}
	if v, ok := vars["super_read_only"]; ok {
		t.Errorf("this server has super_read_only (= %s); the test expects MariaDB, which does not, and should also start a server with it", v)
	}
	// root holds READ ONLY ADMIN (part of ALL PRIVILEGES on MariaDB 10.11),
	// which read_only does not stop, so the schema can be applied here and a
	// refusal below is not a missing table. The same is why NewStore reads
	// the variable instead of trying a write.
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE idemgen"); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, srv.DSN("idemgen"))
	if err := ApplySchema(ctx, db); err != nil {
		t.Fatalf("ApplySchema as root on the read_only server: %v", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE effects (id VARCHAR(255) NOT NULL, worker VARCHAR(255) NOT NULL) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}

	st, err := NewStore(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "@@read_only") {
		if st != nil {
			st.Close()
		}
		t.Fatalf("NewStore on a read_only server: error %v; want an error naming @@read_only", err)
	}
	t.Logf("read_only server refused: %v", err)

	if _, err := admin.ExecContext(ctx, "SET GLOBAL read_only = OFF"); err != nil { // the private server's
		t.Fatal(err)
	}
	if v := readOnlyVars(t, admin)["read_only"]; v != "OFF" {
		t.Fatalf("read_only = %s after SET GLOBAL read_only = OFF", v)
	}
	st, err = NewStore(ctx, db)
	if err != nil {
		t.Fatalf("NewStore once read_only is off: %v", err)
	}
	harness.ClaimWorks(t, st)
	st.Close()
	t.Log("accepted once read_only is off, and a claim acquired")

	// innodb_read_only is not dynamic: restart with it (and read_only off).
	admin.Close()
	db.Close()
	srv.Restart(t, "--innodb-read-only=ON")
	db = openDB(t, srv.DSN("idemgen"))
	if v := readOnlyVars(t, db); v["innodb_read_only"] != "ON" || v["read_only"] != "OFF" {
		t.Fatalf("after the restart with --innodb-read-only=ON: %v", v)
	}
	st, err = NewStore(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "@@innodb_read_only") {
		if st != nil {
			st.Close()
		}
		t.Fatalf("NewStore on an innodb_read_only server: error %v; want an error naming @@innodb_read_only", err)
	}
	t.Logf("innodb_read_only server refused: %v; %s in all", err, time.Since(start).Round(time.Millisecond))
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() }) // before the server stops (cleanups run last first)
	return db
}

// readOnlyVars are the server's variables whose name contains read_only.
func readOnlyVars(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SHOW GLOBAL VARIABLES LIKE '%read\\_only%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		vars[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vars
}
