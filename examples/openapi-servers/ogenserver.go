package main

import (
	"context"
	"net/http"

	"github.com/idemgen/idemgen/examples/openapi-servers/internal/ogenapi"
)

// ogenServer implements the handler interface ogen generated (ogen decodes
// and validates the requests itself).
type ogenServer struct{ shop *shop }

var _ ogenapi.Handler = ogenServer{}

func (s ogenServer) CreateOrder(_ context.Context, req *ogenapi.NewOrder, _ ogenapi.CreateOrderParams) (ogenapi.CreateOrderRes, error) {
	return ogenOrder(s.shop.create(req.Item, req.Amount)), nil
}

func (s ogenServer) GetOrder(_ context.Context, p ogenapi.GetOrderParams) (ogenapi.GetOrderRes, error) {
	o, ok := s.shop.get(p.OrderId)
	if !ok {
		return notFound(p.OrderId), nil
	}
	return ogenOrder(o), nil
}

func (s ogenServer) RefundOrder(_ context.Context, req *ogenapi.NewRefund, p ogenapi.RefundOrderParams) (ogenapi.RefundOrderRes, error) {
	o, ok := s.shop.refund(p.OrderId, req.Amount)
	if !ok {
		return notFound(p.OrderId), nil
	}
	return ogenOrder(o), nil
}

func ogenOrder(o order) *ogenapi.Order {
	return &ogenapi.Order{ID: o.ID, Item: o.Item, Amount: o.Amount, Refunded: o.Refunded}
}

func notFound(id string) *ogenapi.Problem {
	return &ogenapi.Problem{Title: http.StatusText(http.StatusNotFound), Status: http.StatusNotFound, Detail: ogenapi.NewOptString("no order " + id)}
}
