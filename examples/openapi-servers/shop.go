package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// order is the business object both generated servers serve.
type order struct {
	ID       string
	Item     string
	Amount   int64
	Refunded int64
}

// shop is the example's whole business logic, in memory. The counters are
// how many times each protected operation really ran (the tests read them).
type shop struct {
	mu     sync.Mutex
	orders map[string]*order
	seq    int

	creates atomic.Int64
	refunds atomic.Int64
}

func newShop() *shop { return &shop{orders: map[string]*order{}} }

func (s *shop) create(item string, amount int64) order {
	s.creates.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	o := &order{ID: fmt.Sprintf("ord_%d", s.seq), Item: item, Amount: amount}
	s.orders[o.ID] = o
	return *o
}

// refund adds amount to the order's refunded total; false when there is no
// such order.
func (s *shop) refund(id string, amount int64) (order, bool) {
	s.refunds.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return order{}, false
	}
	o.Refunded += amount
	return *o, true
}

func (s *shop) get(id string) (order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return order{}, false
	}
	return *o, true
}
