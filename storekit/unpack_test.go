package storekit

import (
	"bytes"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decimal is a field UnpackRecord accepts: an optionally negative integer
// of 1-18 digits.
var decimal = regexp.MustCompile(`^-?[0-9]{1,18}$`)

// FuzzUnpackRecord: UnpackRecord reads back every live and epoch that
// SQLite's Lookup writes in decimal (strconv's spelling, which is SQLite's
// for an integer), hands what follows them to SplitRecord unchanged, and on
// arbitrary bytes either agrees with strconv on a prefix of two integers of
// 1-18 digits or refuses; it never panics.
func FuzzUnpackRecord(f *testing.F) {
	f.Add(int64(-16*1024+201*16+3), int64(1764676800123456), []byte{7, 7}, []byte("-1,2,x"))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), []byte{}, []byte("--1,2,"))
	f.Add(int64(0), int64(-0), []byte(","), []byte("1234567890123456789,1,"))
	f.Fuzz(func(t *testing.T, live, epoch int64, rest, stored []byte) {
		in := slices.Concat([]byte(strconv.FormatInt(live, 10)+","+strconv.FormatInt(epoch, 10)+","), rest)
		p, err := UnpackRecord(in)
		fits := func(v int64) bool { return v > -1e18 && v < 1e18 }
		if !fits(live) || !fits(epoch) {
			if err == nil {
				t.Fatalf("UnpackRecord(%q) = %+v; want an error (more than 18 digits)", in, p)
			}
		} else {
			fp, headers, body := SplitRecord(rest)
			if err != nil || p.Live != live || p.Epoch != epoch || !bytes.Equal(p.Fingerprint, fp) || !bytes.Equal(p.Headers, headers) || !bytes.Equal(p.Body, body) {
				t.Fatalf("UnpackRecord(%q) = %+v, %v; want %d, %d, %q", in, p, err, live, epoch, rest)
			}
		}

		p, err = UnpackRecord(stored)
		fields := strings.SplitN(string(stored), ",", 3)
		want := len(fields) == 3
		var wl, we int64
		for i, s := range fields[:min(2, len(fields))] {
			v, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil || !decimal.MatchString(s) {
				want = false
			}
			if i == 0 {
				wl = v
			} else {
				we = v
			}
		}
		if !want {
			if err == nil {
				t.Fatalf("UnpackRecord(%q) = %+v; want an error", stored, p)
			}
			return
		}
		if err != nil || p.Live != wl || p.Epoch != we {
			t.Fatalf("UnpackRecord(%q) = %+v, %v; want %d, %d", stored, p, err, wl, we)
		}
		if got := slices.Concat(p.Fingerprint, p.Headers, p.Body); !bytes.Equal(got, []byte(fields[2])) {
			t.Fatalf("UnpackRecord(%q) split the rest into %q", stored, got)
		}
	})
}

func TestUnpackRecordRefuses(t *testing.T) {
	for _, in := range []string{"", ",", "1,", "1,2", ",1,", "1,,", "-,1,", "1,-,", "+1,2,", " 1,2,", "1 ,2,", "1.5,2,", "1,2.0,",
		"1e3,2,", "1234567890123456789,1,", "1,-1234567890123456789,", "0x10,1,"} {
		if p, err := UnpackRecord([]byte(in)); err == nil {
			t.Errorf("UnpackRecord(%q) = %+v; want an error", in, p)
		}
	}
	p, err := UnpackRecord([]byte("-999999999999999999,999999999999999999,"))
	if err != nil || p.Live != -999999999999999999 || p.Epoch != 999999999999999999 || len(p.Fingerprint) != 0 {
		t.Errorf("18 digits: %+v, %v", p, err)
	}
}
