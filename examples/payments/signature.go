package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The provider signs every webhook delivery as Stripe does:
//
//	Payments-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">
//
// with the secret it shares with us. More than one v1 may be sent (while
// the provider rotates secrets); one that matches is enough.
const (
	signatureHeader = "Payments-Signature"
	webhookPath     = "/webhooks/payment-events"
	maxEventBytes   = 1 << 20
)

// signature returns the v1 MAC of body sent at unix time t.
func signature(secret []byte, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, t, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// signHeader is what the provider sends with body at time t.
func signHeader(secret []byte, t time.Time, body []byte) string {
	return "t=" + strconv.FormatInt(t.Unix(), 10) + ",v1=" + hex.EncodeToString(signature(secret, t.Unix(), body))
}

// verifySignature checks a Payments-Signature header against body: a v1
// MAC made with secret (compared in constant time) over a timestamp at
// most tolerance away from now, so that an old delivery cannot be replayed.
func verifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var t int64 = -1
	var macs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || t != -1 || n < 0 {
				return errors.New("the " + signatureHeader + " header needs one t=UNIX-SECONDS")
			}
			t = n
		case "v1":
			if mac, err := hex.DecodeString(v); err == nil {
				macs = append(macs, mac)
			}
		}
	}
	if t == -1 || len(macs) == 0 {
		return errors.New("missing or malformed " + signatureHeader + " header (want t=UNIX-SECONDS,v1=HEX-HMAC-SHA256)")
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return errors.New("the signature's timestamp is more than " + tolerance.String() + " from now")
	}
	want := signature(secret, t, body)
	for _, mac := range macs {
		if hmac.Equal(mac, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches the body")
}

// requireSignature answers 401 to webhook deliveries whose signature does
// not verify, before the idempotency middleware runs: a forged delivery
// must not claim an event id, or the provider's real one would get 422.
func requireSignature(secret []byte, tolerance time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != webhookPath {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventBytes))
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			problem(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		} else if err != nil {
			problem(w, http.StatusBadRequest, "reading the body: "+err.Error())
			return
		}
		if err := verifySignature(secret, r.Header.Get(signatureHeader), body, time.Now(), tolerance); err != nil {
			w.Header().Set("WWW-Authenticate", signatureHeader)
			problem(w, http.StatusUnauthorized, err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}
