package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// SweepOption configures RunSweeper.
type SweepOption func(*sweepConfig)

type sweepConfig struct {
	log  *slog.Logger
	hook func(ctx context.Context, deleted int, err error)
}

// SweepLogger logs each sweep that deleted records (info) or failed (warn).
func SweepLogger(l *slog.Logger) SweepOption { return func(c *sweepConfig) { c.log = l } }

// SweepHook is called after every Sweep call with what it deleted or its
// error.
func SweepHook(f func(ctx context.Context, deleted int, err error)) SweepOption {
	return func(c *sweepConfig) { c.hook = f }
}

// RunSweeper deletes expired records every interval, in batches of at most
// batch records (it calls Sweep until a call deletes fewer than batch), until
// ctx is done; then it returns nil. A failing Sweep is logged and retried at
// the next tick. Expired records are treated as absent whether or not they
// were swept: the sweeper only reclaims space.
func RunSweeper(ctx context.Context, s Store, every time.Duration, batch int, opts ...SweepOption) error {
	if s == nil {
		return errors.New("idempotency: RunSweeper: nil store")
	}
	if every <= 0 || batch <= 0 {
		return errors.New("idempotency: RunSweeper: interval and batch must be positive")
	}
	var cfg sweepConfig
	for _, o := range opts {
		o(&cfg)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		sweepOnce(ctx, s, batch, &cfg)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func sweepOnce(ctx context.Context, s Store, batch int, cfg *sweepConfig) {
	total := 0
	for ctx.Err() == nil {
		n, err := s.Sweep(ctx, batch)
		if cfg.hook != nil {
			cfg.hook(ctx, n, err)
		}
		if err != nil {
			if cfg.log != nil && ctx.Err() == nil {
				cfg.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: sweep failed", slog.Any("error", err))
			}
			return
		}
		total += n
		if n < batch {
			break
		}
	}
	if total > 0 && cfg.log != nil {
		cfg.log.LogAttrs(ctx, slog.LevelInfo, "idempotency: swept expired records", slog.Int("deleted", total))
	}
}
