package main

import (
	"testing"
	"time"
)

func TestVerifySignature(t *testing.T) {
	secret := []byte("whsec_demo")
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	// Made outside Go, as the README shows:
	// printf '%s.%s' 1764576000 "$BODY" | openssl dgst -sha256 -hmac whsec_demo
	const mac = "ff67f8e3d8da2a787e587dca243d0a9fbf81622c8656750ec02521ea4cf9c96b"
	at := time.Unix(1764576000, 0)
	tol := 5 * time.Minute
	for _, c := range []struct {
		what, header string
		body         []byte
		now          time.Time
		ok           bool
	}{
		{"openssl's signature", "t=1764576000,v1=" + mac, body, at, true},
		{"at the edge of the tolerance", "t=1764576000,v1=" + mac, body, at.Add(tol), true},
		{"one of two v1 matches (secret rotation)", "t=1764576000,v1=00ff,v1=" + mac, body, at, true},
		{"spaces after the commas", "t=1764576000, v1=" + mac, body, at, true},
		{"this signer", signHeader(secret, at, body), body, at, true},
		{"too old", "t=1764576000,v1=" + mac, body, at.Add(tol + time.Second), false},
		{"too far ahead", "t=1764576000,v1=" + mac, body, at.Add(-tol - time.Second), false},
		{"another body", "t=1764576000,v1=" + mac, []byte(`{"id":"evt_1","type":"charge.refunded"}`), at, false},
		{"another timestamp", "t=1764576001,v1=" + mac, body, at, false},
		{"another secret", signHeader([]byte("whsec_other"), at, body), body, at, false},
		{"no header", "", body, at, false},
		{"no v1", "t=1764576000", body, at, false},
		{"no t", "v1=" + mac, body, at, false},
		{"two t", "t=1764576000,t=1764576000,v1=" + mac, body, at, false},
		{"t not a number", "t=now,v1=" + mac, body, at, false},
		{"v1 not hex", "t=1764576000,v1=zz", body, at, false},
	} {
		err := verifySignature(secret, c.header, c.body, c.now, tol)
		if (err == nil) != c.ok {
			t.Errorf("%s: verifySignature(%q) = %v, want ok=%v", c.what, c.header, err, c.ok)
		}
	}
}
