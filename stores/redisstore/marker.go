package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The markers (see markerLua in scripts.go) close the window between a
// node losing its records and the re-check noticing it: every claim reads
// its node's marker in the claim script itself, so a claim on a node that
// restarted without persistence, was flushed, or was replaced by a replica
// that did not have its data is refused (ErrRestartedEmpty, 503) from the
// first claim on. A standalone server has one marker, prefix + "marker"; a
// cluster has one per hash slot, prefix + "marker{" + tag + "}" with a tag
// that hashes to the slot, so that the claim script reads the marker of
// the record's own slot (a script may only touch keys of one slot), and a
// resharded slot takes its marker along with its records.

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// markerLive is a marker's value while its node holds its records.
const markerLive = "live"

// slotTags returns, for each hash slot, a short hash tag (a decimal
// number) that hashes to it.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, clusterSlots)
	for n, left := 0, clusterSlots; left > 0; n++ {
		tag := strconv.Itoa(n)
		if slot := crc16(tag) % clusterSlots; tags[slot] == "" {
			tags[slot] = tag
			left--
		}
	}
	return tags
})

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(s string) int {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return int(crc)
}

// crc16Table is CRC-16/XMODEM's table (polynomial 0x1021), one entry per
// byte.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// keySlot is the hash slot of key (of its hash tag, when it has one).
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % clusterSlots
}

// markerKey is the marker that the claim of the record at key reads.
func (s *Store) markerKey(key string) string {
	if s.cluster == nil {
		return s.marker
	}
	return s.slotMarker(slotTags()[keySlot(key)])
}

// slotMarker is a cluster's marker of the hash slot that tag hashes to.
func (s *Store) slotMarker(tag string) string { return s.prefix + "marker{" + tag + "}" }

// writeMarkers sets every marker that is absent to "live" (SET NX: a
// marker that holds the time its loss was found keeps it, so that a store
// started during a refusal does not end it). New calls it: it cannot tell
// a node that is new from one that lost its records before any claim
// found its marker absent, and takes it as new.
func (s *Store) writeMarkers(ctx context.Context) error {
	if s.cluster == nil {
		return s.client.SetNX(ctx, s.marker, markerLive, 0).Err()
	}
	pipe := s.cluster.Pipeline()
	for _, tag := range slotTags() {
		pipe.SetNX(ctx, s.slotMarker(tag), markerLive, 0)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// lostError is the claim script's refusal for a missing marker (reply
// {4, first, remainingMs}): it logs the loss once per refusal window of
// this store and returns ErrRestartedEmpty.
func (s *Store) lostError(reply []any, marker string) error {
	left, _ := reply[2].(int64)
	wait := time.Duration(left) * time.Millisecond
	where := "the Redis server"
	if s.cluster != nil {
		where = fmt.Sprintf("the Redis Cluster node that holds hash slot %d", keySlot(marker))
	}
	err := fmt.Errorf("%w: %s has lost its records (restarted without persistence, flushed, or replaced by a replica "+
		"that did not have them: its marker %s is gone); their keys run again when retried, and claims are refused for %v more, "+
		"until the leases it lost have ended", ErrRestartedEmpty, where, marker, wait)
	s.recheck.lost(wait, func(log *slog.Logger) {
		log.Error("idempotency store: a Redis node restarted without persistence or lost its records otherwise; acknowledged records are lost, "+
			"and every claim on it is refused (503) until the leases it lost have ended", "where", where, "marker", marker,
			"refusing_for", wait, "found_here", reply[1] == int64(1))
	})
	return err
}
