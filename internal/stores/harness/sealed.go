package harness

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// SealedStore is what Sealed needs of a store besides its Backend: the
// raw bytes the store keeps for its key records, and a way to copy one
// record's saved response onto another as someone with write access to the
// database would.
type SealedStore struct {
	// Raw returns every byte of every key record (all columns of all rows,
	// all fields of all hashes), as the database holds them.
	Raw func(ctx context.Context) ([]byte, error)
	// Move copies the saved status, headers and body of the record of
	// (Policy's scope, anonymous, from) onto the record of to.
	Move func(ctx context.Context, from, to string) error
}

// SealSecret is the response that Sealed looks for in the store's bytes.
const SealSecret = "card_fp_5b1e0c93d4"

// SealKey returns a 32-byte test key.
func SealKey(id string, b byte) idemrt.EncryptionKey {
	return idemrt.EncryptionKey{ID: id, Secret: bytes.Repeat([]byte{b}, 32)}
}

func sealRing(t testing.TB, keys ...idemrt.EncryptionKey) *idemrt.KeyRing {
	t.Helper()
	kr, err := idemrt.NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// Sealed checks encryption at rest on a store, in each mode it supports
// (plain, and transactional for a TxStore): with Options.Encryption the
// store's bytes hold neither the response nor its hex or base64; replays
// work, also after a rotation; a record whose key left the ring, or whose
// ciphertext was moved from another record, answers 503 and the handler
// does not run again. A record written without encryption, last, shows
// the secret in Raw: the check can fail.
func Sealed(t *testing.T, b *Backend, s SealedStore) {
	ctx := context.Background()
	modes := []bool{false}
	if _, ok := b.Store.(idemrt.TxStore); ok {
		modes = append(modes, true)
	}
	k1, k2 := SealKey("k1", 1), SealKey("k2", 2)
	var runs int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Location", "/charges/"+SealSecret)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"fingerprint":"`+SealSecret+`"}`)
	})
	wrap := func(transactional bool, ring *idemrt.KeyRing) http.Handler {
		wrapped, err := idemrt.Wrap(idemrt.Options{Store: b.Store, Encryption: ring}, Policy(transactional), h)
		if err != nil {
			t.Fatal(err)
		}
		return wrapped
	}
	for _, tx := range modes {
		name := fmt.Sprintf("sealed-tx%v", tx)
		a, other := UniqueKey(t, name+"-a"), UniqueKey(t, name+"-b")
		srv := wrap(tx, sealRing(t, k1))
		runs = 0
		for _, k := range []string{a, other} {
			if w := Do(srv, k); w.Code != 201 || !strings.Contains(w.Body.String(), SealSecret) {
				t.Fatalf("%s: first request %d %q", name, w.Code, w.Body)
			}
		}
		raw, err := s.Raw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{SealSecret, hex.EncodeToString([]byte(SealSecret)), base64.StdEncoding.EncodeToString([]byte(SealSecret))} {
			if bytes.Contains(bytes.ToLower(raw), []byte(strings.ToLower(v))) {
				t.Fatalf("%s: the store holds the response in clear (%q)", name, v)
			}
		}
		if w := Do(srv, a); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || !strings.Contains(w.Body.String(), SealSecret) ||
			w.Header().Get("Location") != "/charges/"+SealSecret {
			t.Fatalf("%s: replay %d %v %q", name, w.Code, w.Header(), w.Body)
		}
		if w := Do(wrap(tx, sealRing(t, k2, k1)), a); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: replay after rotation %d %q", name, w.Code, w.Body)
		}
		if w := Do(wrap(tx, sealRing(t, k2)), a); w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), SealSecret) {
			t.Fatalf("%s: replay without the sealing key %d %q, want 503", name, w.Code, w.Body)
		}
		if err := s.Move(ctx, other, a); err != nil {
			t.Fatal(err)
		}
		if w := Do(srv, a); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: replay of a moved ciphertext %d %q, want 503", name, w.Code, w.Body)
		}
		if runs != 2 {
			t.Fatalf("%s: handler ran %d times, want 2", name, runs)
		}
	}
	plain := wrap(false, nil)
	if w := Do(plain, UniqueKey(t, "plain")); w.Code != 201 {
		t.Fatalf("plain: %d", w.Code)
	}
	raw, err := s.Raw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(SealSecret)) {
		t.Fatal("a record saved without encryption does not show in Raw: the check above proves nothing")
	}
}

// SQLRaw is SealedStore.Raw for a database/sql store: scope, key, status,
// headers and body of every row of table.
func SQLRaw(db *sql.DB, table string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		rows, err := db.QueryContext(ctx, "SELECT scope, idem_key, status, headers, body FROM "+table)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []byte
		for rows.Next() {
			var scope, key, status, headers, body []byte
			if err := rows.Scan(&scope, &key, &status, &headers, &body); err != nil {
				return nil, err
			}
			for _, c := range [][]byte{scope, key, status, headers, body} {
				out = append(append(out, c...), 0)
			}
		}
		return out, rows.Err()
	}
}
