package storekit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sort"
)

// headerFormat is the first byte of an encoded header set.
const headerFormat = 1

// EncodeHeader encodes h with every value of every name, names sorted:
// format byte 1, then the uvarint count of names, and for each name its
// length and bytes, the uvarint count of values and each value's length and
// bytes. Values are kept byte for byte (JSON would replace invalid UTF-8).
func EncodeHeader(h http.Header) []byte {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	b := []byte{headerFormat}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		values := h[name]
		b = binary.AppendUvarint(b, uint64(len(values)))
		for _, v := range values {
			b = appendString(b, v)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadHeaders = errors.New("idempotency store: stored headers are corrupt")

// DecodeHeader reverses EncodeHeader. An empty input is an empty header;
// anything else that EncodeHeader did not write is an error.
//
// Every replay of a SQL store decodes one, so it allocates little: the
// names and values are substrings of one copy of the input, and the values
// share one array (one value a name, as most have, fits the first
// allocation; each name's slice is capped at its length, so appending to
// one copies it rather than writing into the next name's).
func DecodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return http.Header{}, nil
	}
	if b[0] != headerFormat {
		return nil, fmt.Errorf("idempotency store: stored headers have unknown format %d", b[0])
	}
	d := decoder{b: b[1:], s: string(b[1:])}
	n := d.count()
	if n > uint64(len(d.b)-d.off) {
		return nil, errBadHeaders
	}
	h := make(http.Header, n)
	all := make([]string, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := d.string()
		m := d.count()
		if m > uint64(len(d.b)-d.off) { // every value takes at least one byte
			return nil, errBadHeaders
		}
		start := len(all)
		for j := uint64(0); j < m && d.err == nil; j++ {
			all = append(all, d.string())
		}
		h[name] = all[start:len(all):len(all)]
	}
	if d.err != nil || d.off != len(d.b) {
		return nil, errBadHeaders
	}
	return h, nil
}

// headerLen returns the length of the encoded header set that b starts
// with (EncodeHeader's encoding, followed by anything), reading it as
// DecodeHeader does but keeping nothing; ok is false when b does not start
// with one, and then DecodeHeader refuses b too.
func headerLen(b []byte) (n int, ok bool) {
	if len(b) == 0 || b[0] != headerFormat {
		return 0, false
	}
	d := decoder{b: b[1:]}
	for names := d.count(); names > 0 && d.err == nil; names-- {
		d.skip()
		for values := d.count(); values > 0 && d.err == nil; values-- {
			d.skip()
		}
	}
	return 1 + d.off, d.err == nil
}

// decoder reads b from off; s is b as a string, which the strings it
// returns are cut from.
type decoder struct {
	b   []byte
	s   string
	off int
	err error
}

func (d *decoder) count() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errBadHeaders
		return 0
	}
	d.off += n
	return v
}

// skip passes over one length-prefixed string.
func (d *decoder) skip() {
	l := d.count()
	if d.err != nil || l > uint64(len(d.b)-d.off) {
		d.err = errBadHeaders
		return
	}
	d.off += int(l)
}

func (d *decoder) string() string {
	l := d.count()
	if d.err != nil || l > uint64(len(d.b)-d.off) {
		d.err = errBadHeaders
		return ""
	}
	s := d.s[d.off : d.off+int(l)]
	d.off += int(l)
	return s
}
