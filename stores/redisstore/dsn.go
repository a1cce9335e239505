package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewClient returns a go-redis client for dsn, with ContextTimeoutEnabled
// so that a context deadline (the wrapper's StoreTimeout) bounds every call:
//
//	redis://[user:password@]host:port[/db]       one server (rediss:// for TLS)
//	redis-cluster://[user:password@]host:port,host:port,...   Redis Cluster
//
// A cluster DSN lists one or more seed nodes; the client finds the rest.
func NewClient(dsn string) (redis.UniversalClient, error) {
	if rest, ok := strings.CutPrefix(dsn, "redis-cluster://"); ok {
		opt := &redis.ClusterOptions{ContextTimeoutEnabled: true}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			u, err := url.Parse("redis://" + rest[:at+1] + "x")
			if err != nil {
				return nil, fmt.Errorf("idempotency store: Redis Cluster DSN: %w", err)
			}
			opt.Username = u.User.Username()
			opt.Password, _ = u.User.Password()
			rest = rest[at+1:]
		}
		rest, _, _ = strings.Cut(rest, "/")
		for _, a := range strings.Split(rest, ",") {
			if a = strings.TrimSpace(a); a != "" {
				opt.Addrs = append(opt.Addrs, a)
			}
		}
		if len(opt.Addrs) == 0 {
			return nil, errors.New("idempotency store: Redis Cluster DSN lists no host:port")
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return nil, fmt.Errorf("idempotency store: Redis DSN: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}
