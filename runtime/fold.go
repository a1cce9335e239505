package runtime

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/idemgen/idemgen/internal/jsonnames"
)

// encoding/json matches an object member to a struct field by its exact
// name, else by its name folded (encoding/json/fold.go, appendFoldedName; jsonnames.AppendFolded):
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

// foldHash hashes the folded form of the name k, with every byte's 0x20
// bit set: for ASCII that is the fold (both cases of a letter hash alike)
// and a few more (@ and `, [ and {...): names that hash alike but fold
// apart are told apart by sameFold. A non-ASCII name is folded first, so
// that it hashes like the ASCII names it folds to.
func (c *canonicalizer) foldHash(k []byte) uint64 {
	if h, ok := hashFoldedWords(k, true); ok {
		return h
	}
	c.fbuf = jsonnames.AppendFolded(c.fbuf[:0], k)
	h, _ := hashFoldedWords(c.fbuf, false)
	return h
}

const (
	foldMul = 0x9e3779b97f4a7c15
	lower8  = 0x2020202020202020
	highs8  = 0x8080808080808080
)

// hashFoldedWords hashes b eight bytes at a time, each byte's 0x20 bit
// set; with ascii, ok is false when b is not ASCII.
func hashFoldedWords(b []byte, ascii bool) (uint64, bool) {
	h := uint64(len(b)) * foldMul
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if ascii && w&highs8 != 0 {
			return 0, false
		}
		h = (h ^ (w | lower8)) * foldMul
		b = b[8:]
	}
	if n := len(b); n > 0 {
		var w uint64
		if cap(b) >= 8 {
			// The bytes after the name are in the same buffer: read a word
			// and keep the name's bytes.
			w = binary.LittleEndian.Uint64(b[:8]) & (1<<(8*uint(n)) - 1)
		} else {
			for i := n - 1; i >= 0; i-- {
				w = w<<8 | uint64(b[i])
			}
		}
		if ascii && w&highs8 != 0 {
			return 0, false
		}
		h = (h ^ (w | lower8&(1<<(8*uint(n))-1))) * foldMul
	}
	return h ^ h>>29, true
}

// foldLinear is how many names of an object addFold checks as they come;
// the names of a larger object are checked once at its end, sorted by hash
// (checkFoldsSorted), so that the work stays O(n log n).
const foldLinear = 32

// addFold records the name of a member of the object whose entries start
// at c.folds[base] and checks it against the earlier ones whose hash may be
// equal (bloom, the object's 64-bit filter of hashes, says which may):
// errNotJSON for two equal names, errFoldedDuplicate for two names equal
// once folded.
func (c *canonicalizer) addFold(base int, bloom *uint64, key []byte, ks, ke int, arena bool) error {
	f := foldedName{h: c.foldHash(key), ks: int32(ks), ke: int32(ke), arena: arena}
	if len(c.folds)-base < foldLinear {
		bit := uint64(1) << (f.h >> 58)
		if *bloom&bit != 0 {
			for i := base; i < len(c.folds); i++ {
				if c.folds[i].h == f.h {
					if err := c.sameFold(&c.folds[i], &f); err != nil {
						return err
					}
				}
			}
		}
		*bloom |= bit
	}
	c.folds = append(c.folds, f)
	return nil
}

// endFolds finishes the fold check of the object whose entries start at
// c.folds[base] and drops its entries.
func (c *canonicalizer) endFolds(base int) error {
	fs := c.folds[base:]
	c.folds = c.folds[:base]
	if len(fs) <= foldLinear {
		return nil
	}
	slices.SortFunc(fs, func(a, b foldedName) int { return cmp.Compare(a.h, b.h) })
	for i := 1; i < len(fs); i++ {
		if fs[i].h == fs[i-1].h {
			if err := c.sameFold(&fs[i-1], &fs[i]); err != nil {
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
	f := jsonnames.AppendFolded(c.fbuf[:0], ka)
	n := len(f)
	f = jsonnames.AppendFolded(f, kb)
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
