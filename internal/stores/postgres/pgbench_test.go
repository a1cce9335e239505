package postgres

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// TestPgbenchScripts keeps testdata/pgbench/{replay,newkey}.sql, which time
// the store's own statements with pgbench (docs/performance.md), the same
// as idemgen_queries.sql with literal arguments. -update rewrites them.
func TestPgbenchScripts(t *testing.T) {
	b, err := os.ReadFile("idemgen_queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	q := string(b)
	between := func(from, to string) string {
		i := strings.Index(q, from)
		if i < 0 {
			t.Fatalf("idemgen_queries.sql has no %q", from)
		}
		j := strings.Index(q[i:], to)
		if j < 0 {
			t.Fatalf("idemgen_queries.sql has no %q after %q", to, from)
		}
		return q[i : i+j+len(to)]
	}
	lookup := between("SELECT k.epoch, k.state", ";")
	acquire := between("INSERT INTO idempotency_keys AS t", ";")
	complete := between("UPDATE idempotency_keys\nSET state = 2", ";")
	args := func(key string) *strings.Replacer {
		return strings.NewReplacer(
			"sqlc.arg(scope)", "'createCharge'",
			"sqlc.arg(principal)", `'\x0000000000000000000000000000000000000000000000000000000000000000'::bytea`,
			"sqlc.arg(idem_key)", key,
			"sqlc.arg(fingerprint)", "sha256('fp')",
			"sqlc.arg(fingerprint_version)", "1",
			"sqlc.arg(lease_ms)", "60000",
			"sqlc.arg(ttl_ms)", "86400000",
			"sqlc.arg(status)", "201",
			"sqlc.arg(headers)", `'\x01'::bytea`,
			"sqlc.arg(body)", `convert_to('{"id":"ch_1"}', 'UTF8')`,
			"sqlc.arg(tombstone)", "false",
			"sqlc.arg(epoch)", ":epoch",
		)
	}
	const header = "-- Generated from ../../idemgen_queries.sql with literal arguments by\n-- TestPgbenchScripts (go test ./internal/stores/postgres -run Pgbench -update).\n"
	newKey := "(:client_id || '-' || :r)"
	want := map[string]string{
		"replay.sql": header + "-- A replay: the store's Lookup statement on a completed key.\n\\set k random(0, 999)\n" +
			args("'replay-' || :k").Replace(lookup) + "\n",
		"newkey.sql": header + "-- A first request: the store's Lookup, then its Acquire on a new key, then\n-- its completion (the handler in between costs nothing here).\n\\set r random(1, 1000000000000)\n" +
			args(newKey).Replace(lookup) + "\n" +
			strings.TrimSuffix(args(newKey).Replace(acquire), ";") + "\n\\gset\n" + args(newKey).Replace(complete) + "\n",
	}
	for name, w := range want {
		if strings.Contains(w, "sqlc.arg") {
			t.Fatalf("%s: an argument has no literal: %s", name, w)
		}
		path := filepath.Join("testdata", "pgbench", name)
		if *testutil.Update {
			if err := os.WriteFile(path, []byte(w), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != w {
			t.Errorf("%s differs from idemgen_queries.sql; run go test ./internal/stores/postgres -run Pgbench -update", path)
		}
	}
}
