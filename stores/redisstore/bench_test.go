package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

// BenchmarkStore: 16 concurrent clients through the wrapper (new keys,
// replays) next to plain SET NX and GET on the same client, on a private
// standalone server, a 1-primary cluster and a 3-primary cluster (no
// replicas). Run it in one go test with PostgreSQL's for a comparison on
// the same load:
//
//	go test ./internal/stores/postgres ./stores/redisstore -run '^$' -bench Store -benchtime 2s
func BenchmarkStore(b *testing.B) {
	b.Run("Standalone", func(b *testing.B) {
		srv := harness.StartRedis(b)
		bench(b, "redis://"+srv.Addr())
	})
	b.Run("Cluster1", func(b *testing.B) {
		bench(b, clusterDSN(harness.StartRedisCluster(b, 1, 0)))
	})
	b.Run("Cluster3", func(b *testing.B) {
		bench(b, clusterDSN(harness.StartRedisCluster(b, 3, 0)))
	})
}

func bench(b *testing.B, dsn string) {
	st, client := newStore(b, dsn, redisstore.Options{})
	ctx := context.Background()
	body := []byte(`{"id":"ch_1","amount":100,"currency":"eur"}`)
	const rows = 1000
	preloaded := func(i int) string { return fmt.Sprintf("plain:pre-%d", i) }
	for i := range rows {
		if err := client.Set(ctx, preloaded(i), body, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	harness.Bench(b, st, harness.Baseline{
		Insert: func(ctx context.Context, id string) error {
			return client.SetArgs(ctx, "plain:"+id, body, redis.SetArgs{Mode: "NX"}).Err()
		},
		Select: func(ctx context.Context, id string) error {
			return client.Get(ctx, id).Err()
		},
		Preloaded: preloaded,
		Rows:      rows,
	})
}
