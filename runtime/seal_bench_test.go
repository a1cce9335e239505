package runtime_test

import (
	"fmt"
	"net/http"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// BenchmarkSeal and BenchmarkOpen: what encryption at rest adds to a
// completion and to a replay, for responses of 1, 16 and 256 KiB with two
// replayable headers (see docs/stores.md for the figures).
func BenchmarkSeal(b *testing.B) {
	kr := ring(b, testKey("k1", 1))
	rk := idemrt.RecordKey{Scope: "createCharge", Key: "bench-key-0001"}
	for _, kib := range []int{1, 16, 256} {
		resp := sealBenchResponse(kib)
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			b.SetBytes(int64(len(resp.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kr.Seal(rk, 42, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	kr := ring(b, testKey("k1", 1))
	rk := idemrt.RecordKey{Scope: "createCharge", Key: "bench-key-0001"}
	for _, kib := range []int{1, 16, 256} {
		sealed, err := kr.Seal(rk, 42, sealBenchResponse(kib))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			b.SetBytes(int64(kib << 10))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kr.Open(rk, 42, sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sealBenchResponse(kib int) *idemrt.SavedResponse {
	body := make([]byte, kib<<10)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	return &idemrt.SavedResponse{Status: 201, Header: http.Header{
		"Content-Type": {"application/json"},
		"Location":     {"/v1/charges/ch_0123456789abcdef"},
	}, Body: body}
}
