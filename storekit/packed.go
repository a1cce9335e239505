package storekit

import (
	"fmt"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// A packed lookup reads a record in a few columns instead of one per
// field, since every result column costs the driver and database/sql calls
// and copies: Live, the epoch, the fingerprint, the encoded headers and the
// body (on SQLite all in one column, see UnpackRecord). Live packs the record's
// liveness on the database's clock with the saved status and the
// fingerprint's version:
//
//	live = (liveness * 1024 + status) * 16 + fingerprint_version
//
// where liveness is 0 or more for a record in progress with a live lease
// (the milliseconds left of it), or one of the Live* values below. The
// SQLite store's Lookup computes it. (MySQL's does not: MariaDB skips
// resending a prepared statement's column definitions, so fewer columns
// saved nothing there, and the packing's arithmetic cost the server more.)
const (
	LiveCompleted  = -1 // completed, unexpired, with its response
	LiveTombstone  = -2 // completed, unexpired, a tombstone (no response saved)
	LiveTakeover   = -3 // in progress, unexpired, its lease ended: a claim takes it over
	LiveAbsent     = -4 // expired or released: a claim treats it as absent
	LiveOutOfRange = -5 // a state, status or fingerprint version that does not fit its bits (never written by a store)
)

// Packed is a record as a packed lookup returns it.
type Packed struct {
	Live        int64
	Epoch       int64
	Fingerprint []byte
	Headers     []byte // EncodeHeader's encoding
	Body        []byte
}

// unpack splits p.Live; the low fields are never negative (the shift
// rounds down, as the packing expects).
func (p Packed) unpack() (liveness, status, version int64) {
	return p.Live >> 14, p.Live >> 4 & 1023, p.Live & 15
}

// Result reads p: live reports a record a claim answers with res (a replay
// or a conflict: completed, or in progress within its lease); otherwise
// takeover reports one in progress whose lease ended (a claim takes it over
// at epoch p.Epoch + 1), and neither an absent, expired or released one.
func (p Packed) Result() (res idemrt.ClaimResult, live, takeover bool, err error) {
	liveness, status, version := p.unpack()
	switch {
	case liveness >= 0 || liveness == LiveCompleted || liveness == LiveTombstone:
		rec := Record{
			State:              StateCompleted,
			Epoch:              p.Epoch,
			Fingerprint:        p.Fingerprint,
			FingerprintVersion: version,
			Status:             status,
			Headers:            p.Headers,
			Body:               p.Body,
			Tombstone:          liveness == LiveTombstone,
		}
		if liveness >= 0 {
			rec.State, rec.LeaseRemaining = StateInProgress, time.Duration(liveness)*time.Millisecond
		}
		res, err := rec.Result()
		return res, err == nil, false, err
	case liveness == LiveTakeover:
		return idemrt.ClaimResult{}, false, true, nil
	case liveness == LiveAbsent:
		return idemrt.ClaimResult{}, false, false, nil
	case liveness == LiveOutOfRange:
		return idemrt.ClaimResult{}, false, false, fmt.Errorf("idempotency store: claim: the stored record's state, status or fingerprint version is out of range (status 0-1023, version 0-15)")
	}
	return idemrt.ClaimResult{}, false, false, fmt.Errorf("idempotency store: claim: unknown liveness %d", liveness)
}

// SplitFingerprint splits a column holding the fingerprint followed by the
// encoded headers; a column shorter than a fingerprint comes back whole as
// the fingerprint, which Packed.Result then refuses.
//
// Deprecated: SQLite's Lookup returns the body in the same column now; see
// SplitRecord. Kept for the stores generated before it.
func SplitFingerprint(b []byte) (fingerprint, headers []byte) {
	n := min(len(b), len(idemrt.ClaimResult{}.Fingerprint))
	return b[:n], b[n:]
}

// SplitRecord splits a column holding the fingerprint, the encoded headers
// and the body (fingerprint || headers || body: one column instead of
// three), finding the headers' end from their own encoding. A record
// without a saved response (in progress, released, a tombstone) has empty
// headers and body. A column shorter than a fingerprint comes back whole
// as the fingerprint, which Packed.Result then refuses; a remainder that
// does not start with encoded headers comes back whole as the headers,
// which DecodeHeader refuses when the record is replayed. The parts share
// b's array.
func SplitRecord(b []byte) (fingerprint, headers, body []byte) {
	f := min(len(b), len(idemrt.ClaimResult{}.Fingerprint))
	fingerprint, rest := b[:f], b[f:]
	if n, ok := headerLen(rest); ok {
		return fingerprint, rest[:n], rest[n:]
	}
	return fingerprint, rest, rest[len(rest):]
}

// UnpackRecord reads a record that a lookup returned in one column (the
// SQLite store's Lookup): Live and the epoch in decimal, each followed by a
// comma, then SplitRecord's fingerprint || headers || body. Two integer
// columns cost the driver and database/sql more (a name, a declared type,
// a value, a conversion each) than SQLite's conversion of the two numbers
// to text and this parse. A prefix that is not two decimal integers of at
// most 18 digits, each followed by a comma, is an error, never a guess.
// The parts share b's array.
func UnpackRecord(b []byte) (Packed, error) {
	live, rest, ok := decimalField(b)
	var epoch int64
	if ok {
		epoch, rest, ok = decimalField(rest)
	}
	if !ok {
		return Packed{}, fmt.Errorf("idempotency store: claim: the stored record does not start with its liveness and epoch")
	}
	fingerprint, headers, body := SplitRecord(rest)
	return Packed{Live: live, Epoch: epoch, Fingerprint: fingerprint, Headers: headers, Body: body}, nil
}

// decimalField reads an optionally negative decimal integer of 1 to 18
// digits followed by a comma at the start of b, and returns what follows
// the comma.
func decimalField(b []byte) (v int64, rest []byte, ok bool) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i = 1
	}
	start := i
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + int64(d)
	}
	if n := i - start; n == 0 || n > 18 || i == len(b) || b[i] != ',' {
		return 0, nil, false
	}
	if start == 1 {
		v = -v
	}
	return v, b[i+1:], true
}
