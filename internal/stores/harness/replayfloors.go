package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// SavedRow is what the replay floor saves per key: the request's SHA-256,
// the response's status, Content-Type and body.
type SavedRow struct {
	Fingerprint [sha256.Size]byte
	Status      int
	ContentType string
	Body        []byte
}

// Pack is row in the one column the floor's table keeps it in: the
// digest, the status in two bytes, the Content-Type's length in one and
// the Content-Type, then the body.
func (row SavedRow) Pack() []byte {
	v := append(row.Fingerprint[:], byte(row.Status>>8), byte(row.Status), byte(len(row.ContentType)))
	v = append(v, row.ContentType...)
	return append(v, row.Body...)
}

// unpackSaved is Pack's inverse; its strings and slices share v.
func unpackSaved(v []byte) (SavedRow, error) {
	const head = sha256.Size + 3
	if len(v) < head || len(v) < head+int(v[head-1]) {
		return SavedRow{}, fmt.Errorf("a saved row of %d bytes", len(v))
	}
	row := SavedRow{Fingerprint: [sha256.Size]byte(v), Status: int(v[sha256.Size])<<8 | int(v[sha256.Size+1])}
	end := head + int(v[head-1])
	row.ContentType, row.Body = string(v[head:end]), v[end:]
	return row, nil
}

// savedRow is what Seed saves for every row id: the answer to
// RequestJSON.
var savedRow = SavedRow{
	Fingerprint: sha256.Sum256([]byte(RequestJSON)),
	Status:      http.StatusCreated,
	ContentType: "application/json",
	Body:        httpBody,
}

// floorBuffers hold the floor's request bodies, pooled as the wrapper's are.
var floorBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// floorReplay is the replay floor in work, not only in round trips: a
// bare handler doing what any design must do to answer a retry under the
// contract, and nothing more. It reads the request's body and hashes it
// (a retry with another body must be refused, so some digest of it is
// compared), reads the saved response of the key by its primary key on
// the database with its expiry (one statement, one row, one column: the
// digest, status, Content-Type and body packed together), refuses a digest that differs with
// 422, and answers with the saved status, Content-Type and body, marked
// Idempotent-Replayed. What it leaves out that idemgen does: the key's
// syntax, scopes per operation and principal, the canonical JSON under the
// digest, leases and fencing, several saved headers, the store bound, and
// the hooks; post-get is the floor without even the digest and the saved
// columns.
func floorReplay(get func(ctx context.Context, id string, now time.Time) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		bp := floorBuffers.Get().(*[]byte)
		defer floorBuffers.Put(bp)
		buf := bytes.NewBuffer((*bp)[:0])
		if _, err := io.Copy(buf, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		*bp = buf.Bytes()[:0]
		sum := sha256.Sum256(buf.Bytes())
		v, err := get(r.Context(), r.Header.Get("Idempotency-Key"), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		row, err := unpackSaved(v)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if row.Fingerprint != sum {
			http.Error(w, "the key was used with another request", http.StatusUnprocessableEntity)
			return
		}
		h := w.Header()
		h.Set("Content-Type", row.ContentType)
		h.Set("Idempotent-Replayed", "true")
		w.WriteHeader(row.Status)
		w.Write(row.Body)
	}
}

// postGet is the floor of replay/get in round trips: a bare POST with the
// replay's request (body, Content-Type, Idempotency-Key naming the row)
// whose handler reads the body, does the GET's work and answers as a
// replay does (201, the saved Content-Type, Idempotent-Replayed).
func postGet(get func(ctx context.Context, id string) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, err := get(r.Context(), r.Header.Get("Idempotency-Key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
	}
}
