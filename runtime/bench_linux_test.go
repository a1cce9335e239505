//go:build linux

package runtime_test

import (
	"crypto/sha256"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// threadCPU is the CPU time of the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID): time spent descheduled on a busy machine does
// not count.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkFingerprintRatio alternates canonical fingerprinting and raw
// SHA-256 of the same document on one locked thread, measures each on the
// thread's CPU clock, and reports both throughputs (cpu-MB/s) and their
// ratio ("canon/raw"; 0.25 = a quarter of raw SHA-256). Unlike wall-clock
// MB/s, these hold steady on a loaded machine.
func BenchmarkFingerprintRatio(b *testing.B) {
	for _, d := range benchDocs {
		for _, size := range []int{1 << 10, 64 << 10} {
			doc := d.doc(size)
			name := strconv.Itoa(size>>10) + "KiB"
			if d.name != "" {
				name = d.name + "-" + name
			}
			b.Run(name, func(b *testing.B) { fingerprintRatio(b, doc) })
		}
	}
}

func fingerprintRatio(b *testing.B, doc []byte) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	// Short rounds (about 64 KiB of input on each side), so that both sides
	// of a round see the same interference from the rest of the machine.
	inner := max(1, (64<<10)/len(doc))
	var canon, raw time.Duration
	var ratios []float64
	var n int
	for b.Loop() {
		t0 := threadCPU()
		for i := 0; i < inner; i++ {
			_, _ = idemrt.Fingerprint("POST", "/orders", nil, "application/json", doc, nil, nil)
		}
		t1 := threadCPU()
		for i := 0; i < inner; i++ {
			_ = sha256.Sum256(doc)
		}
		t2 := threadCPU()
		canon += t1 - t0
		raw += t2 - t1
		if t1 > t0 {
			ratios = append(ratios, float64(t2-t1)/float64(t1-t0))
		}
		n += inner
	}
	mb := float64(n*len(doc)) / 1e6
	b.ReportMetric(mb/canon.Seconds(), "canon-cpu-MB/s")
	b.ReportMetric(mb/raw.Seconds(), "raw-cpu-MB/s")
	b.ReportMetric(raw.Seconds()/canon.Seconds(), "canon/raw")
	if len(ratios) > 0 {
		// The median round is less sensitive to bursts of load than the
		// totals.
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "median-canon/raw")
	}
}

// BenchmarkReplayOverhead alternates the bare handler and a replay through
// the middleware (memory store) on one locked thread and reports each on
// the thread's CPU clock, and their difference: the replay overhead.
func BenchmarkReplayOverhead(b *testing.B) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	mw, err := idemrt.NewMiddleware(idemrt.Options{Store: idemrt.NewMemoryStore()}, benchPolicy())
	if err != nil {
		b.Fatal(err)
	}
	bare := benchHandler()
	wrapped := mw(benchHandler())
	r, body := benchRequest("replayed-key")
	w := &benchWriter{h: http.Header{}}
	wrapped.ServeHTTP(w, r)
	const inner = 256
	var bareT, replayT time.Duration
	var n int
	for b.Loop() {
		t0 := threadCPU()
		for i := 0; i < inner; i++ {
			body.off = 0
			w.reset()
			bare.ServeHTTP(w, r)
		}
		t1 := threadCPU()
		for i := 0; i < inner; i++ {
			body.off = 0
			w.reset()
			wrapped.ServeHTTP(w, r)
		}
		t2 := threadCPU()
		if w.code != http.StatusCreated {
			b.Fatalf("status %d", w.code)
		}
		bareT += t1 - t0
		replayT += t2 - t1
		n += inner
	}
	b.ReportMetric(float64(bareT.Nanoseconds())/float64(n), "bare-cpu-ns/op")
	b.ReportMetric(float64(replayT.Nanoseconds())/float64(n), "replay-cpu-ns/op")
	b.ReportMetric(float64((replayT-bareT).Nanoseconds())/float64(n), "overhead-cpu-ns/op")
}
