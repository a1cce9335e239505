package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keysFile writes a keys file of lines and returns its path.
func keysFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "idem.keys")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func b64(b byte, n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n)) }

// With -idem-encryption-keys the key table holds no saved response in
// clear; replays still answer the charge, also after a rotation.
func TestEncryptionKeysFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sealed.db")
	srv, _, _ := newTestApp(t, "-db", db, "-idem-encryption-keys", keysFile(t, "k1:"+b64(1, 32)))
	res, body := post(t, srv, "tok_acme", "/v1/charges", "seal-1", `{"amount":1200,"currency":"eur","customer":"cus_secret_77"}`)
	if res.StatusCode != 201 {
		t.Fatalf("charge: %d %s", res.StatusCode, body)
	}
	var ch struct{ ID string }
	if err := json.Unmarshal([]byte(body), &ch); err != nil || ch.ID == "" {
		t.Fatalf("charge body %s: %v", body, err)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var raw []byte
	rows, err := conn.Query("SELECT idem_key, headers, body FROM idempotency_keys")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, h, b []byte
		if err := rows.Scan(&k, &h, &b); err != nil {
			t.Fatal(err)
		}
		raw = append(append(append(raw, k...), h...), b...)
	}
	rows.Close()
	if !bytes.Contains(raw, []byte("seal-1")) {
		t.Fatal("the key table does not hold the record")
	}
	for _, s := range []string{ch.ID, hex.EncodeToString([]byte(ch.ID)), "cus_secret_77"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Fatalf("the key table holds %q in clear", s)
		}
	}
	again, body2 := post(t, srv, "tok_acme", "/v1/charges", "seal-1", `{"amount":1200,"currency":"eur","customer":"cus_secret_77"}`)
	if again.StatusCode != 201 || again.Header.Get("Idempotent-Replayed") != "true" || body2 != body {
		t.Fatalf("replay: %d %q", again.StatusCode, body2)
	}
	srv.Close()
	rotated, _, _ := newTestApp(t, "-db", db, "-idem-encryption-keys", keysFile(t, "k2:"+b64(2, 32), "k1:"+b64(1, 32)))
	if res, b := post(t, rotated, "tok_acme", "/v1/charges", "seal-1", `{"amount":1200,"currency":"eur","customer":"cus_secret_77"}`); res.StatusCode != 201 || b != body {
		t.Fatalf("replay after rotation: %d %q", res.StatusCode, b)
	}
	rotated.Close()
	retired, _, logs := newTestApp(t, "-db", db, "-idem-encryption-keys", keysFile(t, "k2:"+b64(2, 32)))
	if res, b := post(t, retired, "tok_acme", "/v1/charges", "seal-1", `{"amount":1200,"currency":"eur","customer":"cus_secret_77"}`); res.StatusCode != 503 {
		t.Fatalf("replay without the sealing key: %d %q, want 503", res.StatusCode, b)
	}
	if !strings.Contains(logs.String(), "not in the key ring") {
		t.Errorf("the log does not say why:\n%s", logs)
	}
}

// Bad keys files stop the start with the line that is wrong and without
// the key; the flag can be set in the environment.
func TestEncryptionKeysRefused(t *testing.T) {
	k32, k16 := b64(3, 32), b64(3, 16)
	for _, tc := range []struct {
		name, want string
		lines      []string
	}{
		{"short key", "line 2: key \"b\" has 16 bytes, want 32", []string{"a:" + k32, "b:" + k16}},
		{"duplicate id", "line 3: key id \"a\" appears twice", []string{"a:" + k32, "# old", "a:" + k32}},
		{"not base64", "line 1: the key is not valid base64", []string{"a:" + k32[:20] + "*"}},
		{"no id", "line 1: want KEYID:BASE64", []string{k32}},
		{"empty", "has no key", []string{"", "# none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(context.Background(), []string{"-idem-encryption-keys", keysFile(t, tc.lines...)}, env(nil), &out, &out)
			if code != 2 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, output %q; want 2 and %q", code, out.String(), tc.want)
			}
			if strings.Contains(out.String(), k32[:12]) || strings.Contains(out.String(), k16[:12]) {
				t.Fatalf("the error shows the key: %q", out.String())
			}
		})
	}
	var out bytes.Buffer
	if code := run(context.Background(), nil, env(map[string]string{"PAYMENTS_IDEM_ENCRYPTION_KEYS": filepath.Join(t.TempDir(), "missing")}), &out, &out); code != 2 ||
		!strings.Contains(out.String(), "-idem-encryption-keys") {
		t.Fatalf("a missing file from the environment: exit %d, output %q", code, out.String())
	}
	cfg, err := parseFlags(nil, env(map[string]string{"PAYMENTS_IDEM_ENCRYPTION_KEYS": keysFile(t, "e1:"+k32)}), &out)
	if err != nil || cfg.idemKeys == nil || cfg.idemKeys.IDs()[0] != "e1" {
		t.Fatalf("keys from the environment: %v", err)
	}
}
