package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// server holds the handlers of the payments API. It knows nothing about
// idempotency: the generated middleware in front of it does that work.
type server struct {
	data        dataStore
	chargeDelay time.Duration
	log         *slog.Logger
}

// routes returns the API's handlers on a plain ServeMux.
func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.createCharge)
	mux.HandleFunc("GET /v1/charges", s.listCharges)
	mux.HandleFunc("GET /v1/charges/{id}", s.getCharge)
	mux.HandleFunc("POST /v1/refunds", s.createRefund)
	mux.HandleFunc("PUT /v1/customers/{id}", s.putCustomer)
	mux.HandleFunc("PUT /v1/orders/{id}", s.putOrder)
	mux.HandleFunc("DELETE /v1/orders/{id}", s.deleteOrder)
	mux.HandleFunc("POST "+webhookPath, s.receiveEvent)
	mux.HandleFunc("GET "+webhookPath, s.listEvents)
	return mux
}

// account is the caller's merchant account: the bearer token (a demo; no
// secret is checked). requireBearer has already vetted it.
func account(r *http.Request) string {
	tok, _ := bearer(r)
	return tok
}

func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return "", errors.New("missing Authorization: Bearer token")
	}
	if len(tok) > 255 {
		return "", errors.New("bearer token longer than 255 bytes")
	}
	return tok, nil
}

// requireBearer answers 401 to /v1 requests without a bearer token, before
// the idempotency middleware runs: keys on /v1 are per account.
func requireBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			if _, err := bearer(r); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
				problem(w, http.StatusUnauthorized, err.Error())
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests logs one line per request. Replays carry replayed=true;
// idempotency conflicts show as status 409 or 422 with the key.
func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		attrs := []any{
			"method", r.Method, "path", r.URL.Path, "status", rec.status,
			"dur", time.Since(start).Round(time.Microsecond),
		}
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			// The key's digest, not the key: a client's key may be a
			// business value (an order id).
			attrs = append(attrs, "idempotency_key_hash", idemrt.KeyDigest(k))
		}
		if w.Header().Get("Idempotent-Replayed") == "true" {
			attrs = append(attrs, "replayed", true)
		}
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelError
		}
		log.Log(r.Context(), level, "request", attrs...)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem(w, http.StatusInternalServerError, "encoding the response failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// problem writes an RFC 9457 problem.
func problem(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (s *server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("handler failed", "method", r.Method, "path", r.URL.Path, "err", err)
	problem(w, http.StatusInternalServerError, "internal error")
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON body: trailing data")
	}
	return nil
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

func (s *server) createCharge(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount      int64  `json:"amount"`
		Currency    string `json:"currency"`
		Customer    string `json:"customer"`
		Description string `json:"description"`
	}
	if err := decode(r, &req); err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case req.Amount < 1:
		problem(w, http.StatusBadRequest, "amount must be a positive integer (minor units)")
		return
	case !currencyRE.MatchString(req.Currency):
		problem(w, http.StatusBadRequest, "currency must be a three-letter lower-case ISO 4217 code")
		return
	case req.Customer == "" || len(req.Customer) > 255:
		problem(w, http.StatusBadRequest, "customer is required (at most 255 bytes)")
		return
	case len(req.Description) > 1000:
		problem(w, http.StatusBadRequest, "description is at most 1000 bytes")
		return
	}
	c := Charge{
		ID: newID("ch_"), Object: "charge", Amount: req.Amount, Currency: req.Currency,
		Customer: req.Customer, Description: req.Description, Created: now(),
	}
	if err := s.data.InsertCharge(r.Context(), account(r), c); err != nil {
		s.internal(w, r, err)
		return
	}
	if s.chargeDelay > 0 {
		// Test hook: the charge row is written (uncommitted) and the process
		// may be killed here.
		s.log.Warn("charge delayed (test hook)", "charge", c.ID, "delay", s.chargeDelay)
		select {
		case <-time.After(s.chargeDelay):
		case <-r.Context().Done():
			s.internal(w, r, r.Context().Err())
			return
		}
	}
	w.Header().Set("Location", "/v1/charges/"+c.ID)
	writeJSON(w, http.StatusCreated, c)
}

const maxListLimit = 10000

func parseLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, fmt.Errorf("limit must be an integer from 1 to %d", maxListLimit)
	}
	return n, nil
}

func (s *server) listCharges(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := s.data.ListCharges(r.Context(), account(r), limit)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

func (s *server) getCharge(w http.ResponseWriter, r *http.Request) {
	c, err := s.data.GetCharge(r.Context(), account(r), r.PathValue("id"))
	if errors.Is(err, errNotFound) {
		problem(w, http.StatusNotFound, "no such charge")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *server) createRefund(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Charge string `json:"charge"`
		Amount int64  `json:"amount"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &req); err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Charge == "" || req.Amount < 1 || len(req.Charge) > 64 || len(req.Reason) > 1000 {
		problem(w, http.StatusBadRequest, "charge and a positive amount are required (reason: at most 1000 bytes)")
		return
	}
	ref := Refund{ID: newID("re_"), Object: "refund", Charge: req.Charge, Amount: req.Amount, Reason: req.Reason, Created: now()}
	switch err := s.data.InsertRefund(r.Context(), account(r), ref); {
	case errors.Is(err, errNotFound):
		problem(w, http.StatusNotFound, "no such charge")
	case errors.Is(err, errRefundTooLarge):
		problem(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.internal(w, r, err)
	default:
		writeJSON(w, http.StatusCreated, ref)
	}
}

func (s *server) putCustomer(w http.ResponseWriter, r *http.Request) {
	var c Customer
	if err := decode(r, &c); err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	if c.Name == "" || len(c.Name) > 1000 || len(c.Email) > 1000 || len(r.PathValue("id")) > 255 {
		problem(w, http.StatusBadRequest, "name is required (name, email: at most 1000 bytes; id: 255)")
		return
	}
	if c.ID != "" && c.ID != r.PathValue("id") {
		problem(w, http.StatusBadRequest, "id in the body differs from the path")
		return
	}
	c.ID = r.PathValue("id")
	if err := s.data.PutCustomer(r.Context(), account(r), c); err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *server) putOrder(w http.ResponseWriter, r *http.Request) {
	var o Order
	if err := decode(r, &o); err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	if o.Customer == "" || o.Amount < 1 || !currencyRE.MatchString(o.Currency) || len(o.Customer) > 255 || len(r.PathValue("id")) > 255 {
		problem(w, http.StatusBadRequest, "customer, a positive amount and a currency are required (customer, id: at most 255 bytes)")
		return
	}
	if o.ID != "" && o.ID != r.PathValue("id") {
		problem(w, http.StatusBadRequest, "id in the body differs from the path")
		return
	}
	o.ID = r.PathValue("id")
	if err := s.data.PutOrder(r.Context(), account(r), o); err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *server) deleteOrder(w http.ResponseWriter, r *http.Request) {
	switch err := s.data.DeleteOrder(r.Context(), account(r), r.PathValue("id")); {
	case errors.Is(err, errNotFound):
		problem(w, http.StatusNotFound, "no such order")
	case err != nil:
		s.internal(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *server) receiveEvent(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxEventBytes))
	if err != nil {
		problem(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var ev struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		problem(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if ev.ID == "" || ev.Type == "" || len(ev.ID) > 255 || len(ev.Type) > 255 {
		problem(w, http.StatusBadRequest, "id and type are required (at most 255 bytes each)")
		return
	}
	first, err := s.data.RecordEvent(r.Context(), Event{ID: ev.ID, Type: ev.Type, Received: now()}, payload)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !first {
		s.log.Info("payment event already processed", "event", ev.ID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": ev.ID, "received": true})
}

func (s *server) listEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := s.data.ListEvents(r.Context(), limit)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}
