package runtime

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ProblemBase prefixes every problem type URI this runtime writes.
const ProblemBase = "https://idemgen.dev/problems/"

// Problem type URIs (RFC 9457 "type"), stable across releases.
const (
	ProblemKeyMissing          = ProblemBase + "key-missing"          // 400
	ProblemKeyMalformed        = ProblemBase + "key-malformed"        // 400
	ProblemBodyUnreadable      = ProblemBase + "body-unreadable"      // 400
	ProblemUnauthenticated     = ProblemBase + "unauthenticated"      // 401
	ProblemRequestTooLarge     = ProblemBase + "request-too-large"    // 413
	ProblemFingerprintMismatch = ProblemBase + "fingerprint-mismatch" // 422
	ProblemInProgress          = ProblemBase + "in-progress"          // 409
	ProblemResultUnavailable   = ProblemBase + "result-unavailable"   // 409
	ProblemStoreUnavailable    = ProblemBase + "store-unavailable"    // 503
	ProblemMountedTwice        = ProblemBase + "mounted-twice"        // 500
	ProblemResponseTooLarge    = ProblemBase + "response-too-large"   // 500
)

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

var problemTitles = map[string]string{
	ProblemKeyMissing:          "Idempotency key missing",
	ProblemKeyMalformed:        "Idempotency key malformed",
	ProblemBodyUnreadable:      "Request body unreadable",
	ProblemUnauthenticated:     "Caller not authenticated",
	ProblemRequestTooLarge:     "Request body too large",
	ProblemFingerprintMismatch: "Idempotency key reused with a different request",
	ProblemInProgress:          "Request with this idempotency key in progress",
	ProblemResultUnavailable:   "Result unavailable",
	ProblemStoreUnavailable:    "Idempotency store unavailable",
	ProblemMountedTwice:        "Idempotency middleware mounted twice",
	ProblemResponseTooLarge:    "Response too large for a transactional operation",
}

// writeProblem writes an RFC 9457 response. retryAfter > 0 adds a
// Retry-After header (seconds).
func writeProblem(w http.ResponseWriter, status int, typ, detail string, retryAfter int) {
	h := w.Header()
	body, _ := json.Marshal(Problem{Type: typ, Title: problemTitles[typ], Status: status, Detail: detail})
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
