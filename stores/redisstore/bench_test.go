package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/stores/redisstore"
	"github.com/redis/go-redis/v9"
)

// BenchmarkStore: 16 concurrent clients through the wrapper (new keys,
// replays) next to plain SET NX and GET on the same client, on a private
// standalone server (and one in WAIT mode with a replica), a 1-primary
// cluster and a 3-primary cluster (no replicas). Run it in one go test with PostgreSQL's for a comparison on
// the same load:
//
//	go test ./internal/stores/postgres ./stores/redisstore -run '^$' -bench Store -benchtime 2s
func BenchmarkStore(b *testing.B) {
	b.Run("Standalone", func(b *testing.B) {
		srv := harness.StartRedis(b)
		bench(b, "redis://"+srv.Addr(), redisstore.Options{})
	})
	b.Run("StandaloneWait", func(b *testing.B) {
		// WAIT mode: a primary and one replica, WaitReplicas 1.
		primary := harness.StartRedis(b)
		harness.StartRedis(b, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
		waitReplicas(b, primary, 1)
		bench(b, "redis://"+primary.Addr(), redisstore.Options{WaitReplicas: 1, AllowNoAppendOnly: true})
	})
	b.Run("Cluster1", func(b *testing.B) {
		bench(b, clusterDSN(harness.StartRedisCluster(b, 1, 0)), redisstore.Options{})
	})
	b.Run("Cluster3", func(b *testing.B) {
		bench(b, clusterDSN(harness.StartRedisCluster(b, 3, 0)), redisstore.Options{})
	})
}

func bench(b *testing.B, dsn string, opts redisstore.Options) {
	st, client := newStore(b, dsn, opts)
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
