package redisstore_test

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/stores/harness"
	idemrt "github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/stores/redisstore"
)

// TestSealed: with encryption on, the hashes hold neither the response nor
// its hex, and a ciphertext moved onto another record does not open.
func TestSealed(t *testing.T) {
	srv := harness.StartRedis(t)
	st, client := newStore(t, "redis://"+srv.Addr(), redisstore.Options{})
	key := func(k string) string {
		return st.Key(idemrt.RecordKey{Scope: harness.Policy(false).OperationID, Key: k})
	}
	harness.Sealed(t, backend(st, client), harness.SealedStore{
		Raw: func(ctx context.Context) ([]byte, error) {
			keys, err := client.Keys(ctx, "*").Result()
			if err != nil {
				return nil, err
			}
			var out []byte
			for _, k := range keys {
				if typ, err := client.Type(ctx, k).Result(); err != nil || typ == "string" {
					// The marker (marker.go), or an error.
					v, _ := client.Get(ctx, k).Result()
					out = append(out, k+"\x00"+v+"\x00"...)
					if err != nil {
						return nil, err
					}
					continue
				}
				fields, err := client.HGetAll(ctx, k).Result()
				if err != nil {
					return nil, err
				}
				out = append(out, k+"\x00"...)
				for f, v := range fields {
					out = append(out, f+"\x00"+v+"\x00"...)
				}
			}
			return out, nil
		},
		Move: func(ctx context.Context, from, to string) error {
			v, err := client.HMGet(ctx, key(from), "c", "h", "b").Result()
			if err != nil {
				return err
			}
			return client.HSet(ctx, key(to), "c", v[0], "h", v[1], "b", v[2]).Err()
		},
	})
}
