package runtime

import (
	"cmp"
	"encoding/binary"
	"slices"
	"unicode"
	"unicode/utf8"
)

// encoding/json matches an object member to a struct field by its exact
// name, else by its name folded (encoding/json/fold.go, appendFoldedName):
// ASCII letters upper-cased, every other rune replaced by the smallest rune
// of its unicode.SimpleFold orbit, so "amount", "Amount", "AMOUNT" and
// "amount" with the Kelvin sign or the long s in place of k or s all reach
// the field tagged "amount", and the last one in the document wins. Two
// such names in one object make what a handler sees depend on their order,
// so the fold check (canonicalizer.fold) refuses them as it refuses an
// exact duplicate. Names that fold differently never reach the same field.

// foldedName is a member name as the fold check holds it: the hash of its
// folded form and where its bytes are (c.keys[ks:ke] if arena, else
// c.in[ks:ke]).
type foldedName struct {
	h      uint64
	ks, ke int32
	arena  bool
}

// foldHash hashes the folded form of the name k.
func (c *canonicalizer) foldHash(k []byte) uint64 {
	if h, ok := hashFoldedWords(k, true); ok {
		return h
	}
	c.fbuf = appendFoldedName(c.fbuf[:0], k)
	h, _ := hashFoldedWords(c.fbuf, false)
	return h
}

const (
	foldMul1 = 0x9e3779b97f4a7c15
	foldMul2 = 0xbf58476d1ce4e5b9
	ones8    = 0x0101010101010101
	highs8   = 0x8080808080808080
)

// hashFoldedWords hashes b eight bytes at a time; with upper, b must be
// ASCII (ok is false otherwise) and is upper-cased as it is read, which
// for ASCII is the fold, so an ASCII name and its folded form hash alike.
func hashFoldedWords(b []byte, upper bool) (uint64, bool) {
	h := uint64(len(b)) * foldMul1
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if upper {
			if w&highs8 != 0 {
				return 0, false
			}
			w = upperASCII(w)
		}
		h = (h ^ w) * foldMul2
		h ^= h >> 31
		b = b[8:]
	}
	var w uint64
	for i := len(b) - 1; i >= 0; i-- {
		w = w<<8 | uint64(b[i])
	}
	if upper {
		if w&highs8 != 0 {
			return 0, false
		}
		w = upperASCII(w)
	}
	h = (h ^ w) * foldMul2
	return h ^ h>>32, true
}

// upperASCII upper-cases the ASCII letters of eight ASCII bytes.
func upperASCII(w uint64) uint64 {
	ge := w + ones8*(0x80-'a')    // high bit: byte >= 'a'
	gt := w + ones8*(0x80-'z'-1)  // high bit: byte > 'z'
	return w - (ge&^gt&highs8)>>2 // 0x80 >> 2 = 'a' - 'A'
}

// appendFoldedName is encoding/json's (fold.go).
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune returns the smallest rune of r's unicode.SimpleFold orbit
// (encoding/json's foldRune).
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// checkFolds checks the names of the object whose entries start at
// c.folds[base]: errNotJSON for two equal names, errFoldedDuplicate for two
// names equal once folded.
func (c *canonicalizer) checkFolds(base int) error {
	fs := c.folds[base:]
	if len(fs) < 2 {
		return nil
	}
	if len(fs) <= 16 {
		for i := 1; i < len(fs); i++ {
			for j := 0; j < i; j++ {
				if fs[i].h == fs[j].h {
					if err := c.sameFold(&fs[i], &fs[j]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	slices.SortFunc(fs, func(a, b foldedName) int { return cmp.Compare(a.h, b.h) })
	for i := 1; i < len(fs); i++ {
		if fs[i].h == fs[i-1].h {
			if err := c.sameFold(&fs[i], &fs[i-1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameFold compares two names whose folded hashes are equal.
func (c *canonicalizer) sameFold(a, b *foldedName) error {
	ka, kb := c.foldedKey(a), c.foldedKey(b)
	if string(ka) == string(kb) {
		return errNotJSON // an exact duplicate
	}
	f := appendFoldedName(c.fbuf[:0], ka)
	n := len(f)
	f = appendFoldedName(f, kb)
	c.fbuf = f
	if string(f[:n]) == string(f[n:]) {
		return errFoldedDuplicate
	}
	return nil // a hash collision
}

func (c *canonicalizer) foldedKey(f *foldedName) []byte {
	if f.arena {
		return c.keys[f.ks:f.ke]
	}
	return c.in[f.ks:f.ke]
}
