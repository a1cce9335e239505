package redisstore

import "github.com/redis/go-redis/v9"

// The record of one key is a hash at one Redis key (so in one cluster hash
// slot) with the fields
//
//	s  state: 1 in progress, 2 completed, 3 released (storekit's states)
//	e  epoch, a decimal integer
//	f  fingerprint (32 bytes), v its version
//	l  lease end, milliseconds on the server's clock
//	c  status, h headers (storekit.EncodeHeader), b body: a saved response
//	t  "1" for a tombstone
//
// and an expiry (PEXPIRE) at the record's TTL: an expired record is absent
// to every script, and Redis reclaims it. Each script is one atomic step on
// the server; every time decision uses the server's TIME.

// nowLua sets now_us (the server's clock in microseconds, a decimal string)
// and now_ms (milliseconds, a number). Lua numbers are doubles: both fit in
// their 53 bits, and string.format('%d', ...) prints them without an exponent.
const nowLua = `
local t = redis.call('TIME')
local now_us = t[1] .. string.format('%06d', tonumber(t[2]))
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// Out of memory. Each script begins with a shebang, which gives it Redis 7
// script flags: Redis then decides before the script runs whether it may
// run when memory is over maxmemory (with the noeviction policy New
// requires). Without one, Redis checks memory only at the script's first
// write command, and not at all when that command (DEL) is one it never
// refuses: an out-of-memory server accepted claims and then refused their
// completions. So:
//
//	claimScript     "#!lua": refused (OOM error) before it runs, so no claim is
//	                granted that its completion could not keep
//	peekScript      "#!lua flags=no-writes": runs; Claim falls back on it after
//	                an OOM refusal, so replays and 409s are still answered
//	completeScript  "#!lua flags=allow-oom": runs, and so do its writes: a
//	releaseScript   claim granted is always completed or released; memory may
//	                pass maxmemory by the responses of the claims in flight
const (
	denyOOM  = "#!lua"
	allowOOM = "#!lua flags=allow-oom"
	noWrites = "#!lua flags=no-writes"
)

// readLua, after nowLua, reads the record into r (state s) and returns the
// claim's answer when the record is in progress within its lease
//
//	{2, epoch, fingerprint, version, leaseRemainingMs}
//
// or completed
//
//	{3, epoch, fingerprint, version, status, headers, body, tombstone}
//
// and falls through when the key can be claimed: absent (or expired),
// released (s 3), or in progress past its lease.
const readLua = `
local r = redis.call('HMGET', KEYS[1], 's', 'e', 'f', 'v', 'l')
local s = r[1]
if s == '1' and tonumber(r[5]) > now_ms then
  return {2, r[2], r[3], r[4], tonumber(r[5]) - now_ms}
end
if s and s ~= '1' and s ~= '3' then
  local c = redis.call('HMGET', KEYS[1], 'c', 'h', 'b', 't')
  return {3, r[2], r[3], r[4], c[1], c[2], c[3], c[4]}
end
`

// markerLua, after nowLua, refuses the claim unless KEYS[2], the marker
// of the record's node (markerKey: on a cluster, one per hash slot, in the
// record's slot), says the node still holds the records it acknowledged.
// New writes every marker ("live"), without a TTL, so that no
// maxmemory-policy New accepts evicts it. A node restarted without
// persistence, flushed (FLUSHALL, FLUSHDB), or replaced by a replica
// promoted before it had the data comes back without it: the first claim
// that finds it absent notes the time (the marker holds now_ms) and every
// claim is refused,
//
//	{4, first, remainingMs}   first: 1 for the claim that found it absent
//
// until ARGV[5] ms (the longest lease of the claiming store) have passed
// since, so that the claims in progress the node forgot cannot run beside
// their retries; then the next claim sets the marker back to "live" and
// goes on. A marker that is absent is never re-created before that: a
// restart in the window begins it again.
const markerLua = `
local m = redis.call('GET', KEYS[2])
local resumed = 0
if m ~= 'live' then
  if not m then
    redis.call('SET', KEYS[2], string.format('%d', now_ms))
    return {4, 1, tonumber(ARGV[5])}
  end
  local left = (tonumber(m) or now_ms) + tonumber(ARGV[5]) - now_ms
  if left > 0 then return {4, 0, left} end
  redis.call('SET', KEYS[2], 'live')
  resumed = 1
end
`

// claimScript: KEYS[1] the record, KEYS[2] its node's marker (markerLua);
// ARGV fingerprint, fingerprint version, lease ms, ttl ms, refusal window
// ms. Returns markerLua's refusal, readLua's answers, or
//
//	{1, epoch, takenOver, resumed}   acquired (resumed: this claim ended a refusal window)
//
// A fresh record's epoch is the server's clock in microseconds, so that a
// record re-created after the old one expired follows every epoch that one
// handed out; a takeover or a claim of a released record is previous+1.
var claimScript = redis.NewScript(denyOOM + nowLua + markerLua + readLua + `
local epoch
local taken = 0
if not s then
  epoch = now_us
else
  epoch = string.format('%d', tonumber(r[2]) + 1)
  if s == '1' then taken = 1 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', '1', 'e', epoch, 'f', ARGV[1], 'v', ARGV[2],
  'l', string.format('%d', now_ms + tonumber(ARGV[3])))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, epoch, taken, resumed}
`)

// peekScript: KEYS[1] the record. Returns readLua's answers, or {0} when
// the key could be claimed (which claimScript was refused to do).
var peekScript = redis.NewScript(noWrites + nowLua + readLua + `
return {0}
`)

// completeScript: KEYS[1] the record; ARGV epoch, ttl ms, tombstone ("1" or
// "0"), status, headers, body. Returns 1, or 0 when the record is not in
// progress at epoch (fenced).
var completeScript = redis.NewScript(allowOOM + nowLua + `
local r = redis.call('HMGET', KEYS[1], 's', 'e')
if r[1] ~= '1' or r[2] ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 's', '2', 't', '1', 'l', string.format('%d', now_ms))
else
  redis.call('HSET', KEYS[1], 's', '2', 'c', ARGV[4], 'h', ARGV[5], 'b', ARGV[6],
    'l', string.format('%d', now_ms))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript: KEYS[1] the record; ARGV epoch. Returns 1, or 0 when the
// record is not in progress at epoch (fenced). A released record stays
// until it expires, so that the next claim continues its epoch.
var releaseScript = redis.NewScript(allowOOM + `
local r = redis.call('HMGET', KEYS[1], 's', 'e')
if r[1] ~= '1' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 's', '3')
redis.call('HDEL', KEYS[1], 'c', 'h', 'b', 't')
return 1
`)
