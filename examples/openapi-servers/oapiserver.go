package main

import (
	"encoding/json"
	"net/http"

	"github.com/idemgen/idemgen/examples/openapi-servers/internal/oapi"
)

// oapiServer implements the interface oapi-codegen generated.
type oapiServer struct{ shop *shop }

var _ oapi.ServerInterface = oapiServer{}

func (s oapiServer) CreateOrder(w http.ResponseWriter, r *http.Request, _ oapi.CreateOrderParams) {
	var in oapi.NewOrder
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Item == "" || in.Amount < 1 {
		writeProblem(w, http.StatusBadRequest, "want a JSON body with an item and an amount of at least 1")
		return
	}
	writeJSON(w, http.StatusCreated, oapiOrder(s.shop.create(in.Item, in.Amount)))
}

func (s oapiServer) GetOrder(w http.ResponseWriter, r *http.Request, id oapi.OrderId) {
	o, ok := s.shop.get(id)
	if !ok {
		writeProblem(w, http.StatusNotFound, "no order "+id)
		return
	}
	writeJSON(w, http.StatusOK, oapiOrder(o))
}

func (s oapiServer) RefundOrder(w http.ResponseWriter, r *http.Request, id oapi.OrderId, _ oapi.RefundOrderParams) {
	var in oapi.NewRefund
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount < 1 {
		writeProblem(w, http.StatusBadRequest, "want a JSON body with an amount of at least 1")
		return
	}
	o, ok := s.shop.refund(id, in.Amount)
	if !ok {
		writeProblem(w, http.StatusNotFound, "no order "+id)
		return
	}
	writeJSON(w, http.StatusCreated, oapiOrder(o))
}

func oapiOrder(o order) oapi.Order {
	return oapi.Order{Id: o.ID, Item: o.Item, Amount: o.Amount, Refunded: o.Refunded}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(oapi.Problem{Title: http.StatusText(status), Status: status, Detail: &detail})
}
