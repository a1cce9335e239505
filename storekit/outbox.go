package storekit

import (
	"encoding/json"
	"fmt"
	"time"
)

// The outbox's helpers that every SQL store shares (the Redis store has no
// outbox).

// EncodeEventHeaders encodes an outbox event's headers as a JSON object
// (keys sorted), or as nothing when there are none.
func EncodeEventHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return []byte{}, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("idempotency store: encoding event headers: %w", err)
	}
	return b, nil
}

// DecodeEventHeaders decodes what EncodeEventHeaders wrote: nothing is no
// headers (nil).
func DecodeEventHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("idempotency store: decoding event headers: %w", err)
	}
	return h, nil
}

// MaxClaimEvents bounds the events one ClaimEvents call takes.
const MaxClaimEvents = 1 << 20

// CheckClaimEvents checks the arguments of an outbox store's ClaimEvents
// and bounds limit by MaxClaimEvents.
func CheckClaimEvents(limit int, lease time.Duration) (int, error) {
	if limit <= 0 || lease <= 0 {
		return 0, fmt.Errorf("idempotency store: claim events: limit and lease must be positive, got %d and %v", limit, lease)
	}
	return min(limit, MaxClaimEvents), nil
}

// NonNil returns b, or an empty slice for nil (the columns are NOT NULL).
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
