package amqpidem

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmer publishes on a channel in confirm mode, one message at a time,
// and reports success only for a message the broker confirmed (ack) and
// did not return as unroutable (every publish is mandatory).
type confirmer struct {
	mu      sync.Mutex
	conn    *amqp.Connection
	dial    func() (*amqp.Connection, error) // nil: conn only, never redialed
	ownConn bool                             // conn came from dial: close it with the confirmer
	ch      *amqp.Channel
	returns chan amqp.Return
}

// channel returns the open confirm channel, opening it (and dialing, when
// the confirmer may) if it is closed. Called with mu held.
func (c *confirmer) channel() (*amqp.Channel, error) {
	if c.ch != nil && !c.ch.IsClosed() {
		return c.ch, nil
	}
	if c.conn == nil || c.conn.IsClosed() {
		if c.dial == nil {
			return nil, errors.New("the connection is closed")
		}
		conn, err := c.dial()
		if err != nil {
			return nil, fmt.Errorf("dial: %w", err)
		}
		c.conn, c.ownConn = conn, true
	}
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	// A publish waits for its confirm before the next one starts, and the
	// broker sends a return before the confirm of the same message, so the
	// buffer never fills (a full buffer would block the connection).
	c.returns = ch.NotifyReturn(make(chan amqp.Return, 4))
	c.ch = ch
	return ch, nil
}

// publish publishes msg (mandatory) and waits for its confirm.
func (c *confirmer) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, err := c.channel()
	if err != nil {
		return err
	}
	c.drainReturns()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		return err
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the publisher confirm: %w", err)
	}
	if !acked {
		if ch.IsClosed() {
			return errors.New("the channel closed before the broker confirmed the message")
		}
		return errors.New("the broker refused the message (publisher nack)")
	}
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				return nil // channel closed after the ack: the message is confirmed
			}
			if r.MessageId != msg.MessageId {
				continue // left over from an earlier publish that gave up waiting
			}
			return fmt.Errorf("unroutable: no queue is bound for exchange %q and routing key %q (%d %s)", exchange, key, r.ReplyCode, r.ReplyText)
		default:
			return nil
		}
	}
}

func (c *confirmer) drainReturns() {
	for {
		select {
		case _, ok := <-c.returns:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// close closes the channel, and the connection if the confirmer dialed it.
func (c *confirmer) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.ch != nil {
		if cerr := c.ch.Close(); cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
			err = cerr
		}
		c.ch = nil
	}
	if c.ownConn && c.conn != nil {
		if cerr := c.conn.Close(); cerr != nil && !errors.Is(cerr, amqp.ErrClosed) && err == nil {
			err = cerr
		}
		c.conn = nil
	}
	return err
}
