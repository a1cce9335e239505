-- name: Lookup :one
-- Lookup reads the record of a key with its liveness, measured on the
-- database's clock. Reads are cheap in SQLite: a replay costs this one read,
-- and each column of the result costs calls into SQLite, the driver and
-- database/sql (a column name, its declared type, its value, a copy, a
-- conversion), so the record comes back in one column: live and the epoch
-- in decimal, each followed by a comma, then the record's bytes (see
-- storekit.UnpackRecord). live packs state, expiry, lease and tombstone
-- with the response's status and the fingerprint's version:
-- live = (liveness * 1024 + status) * 16 + fingerprint_version, where
-- liveness is
--   >= 0 in progress with a live lease: the milliseconds left of it
--   -1   completed, unexpired, with its response
--   -2   completed, unexpired, a tombstone (no response saved)
--   -3   in progress, unexpired, lease ended: a claim takes it over
--   -4   expired or released: a claim treats it as absent
--   -5   a status or fingerprint version that does not fit its bits (never
--        written by the store; an error)
-- and record is the 32-byte fingerprint followed by the encoded headers
-- and the body (both empty unless completed; the headers' encoding tells
-- where they end, see storekit.SplitRecord). The clock is read once, and
-- only for a record that exists. The key's parameters are plain ? (sqlc
-- names them after their columns), not sqlc.arg's ?NNN: the driver
-- (modernc.org/sqlite) reads a numbered parameter's name back from SQLite
-- into a Go string and parses it on every execution, and binds a plain ?
-- by its position.
SELECT CAST(CAST((CASE
           WHEN status NOT BETWEEN 0 AND 1023 OR fingerprint_version NOT BETWEEN 0 AND 15 THEN -5
           WHEN expires_at <= (julianday() - 2440587.5) * 86400000 OR state = 3 THEN -4
           WHEN state = 2 THEN CASE WHEN tombstone THEN -2 ELSE -1 END
           WHEN lease_until <= (julianday() - 2440587.5) * 86400000 THEN -3
           ELSE MAX(CAST(lease_until - (julianday() - 2440587.5) * 86400000 AS INTEGER), 0)
       END * 1024 + (status & 1023)) * 16 + (fingerprint_version & 15) AS INTEGER)
       || ',' || epoch || ',' || fingerprint || headers || body AS BLOB) AS record
FROM idempotency_keys
WHERE scope = ? AND principal = ? AND idem_key = ?;

-- name: Acquire :one
-- Acquire claims a key that is absent, expired, released, or in progress
-- with an ended lease, in one statement: the conflict clause re-checks the record
-- under SQLite's write lock. No row means another attempt holds the key.
-- A fresh row's epoch is the clock in microseconds (SQLite's clock counts
-- milliseconds), so that a row re-created after Sweep deleted the key's
-- previous one follows every epoch that one handed out (its creation time
-- plus one per claim after); a claim of an existing row is its epoch + 1.
-- The record may be swept lease + ttl from now (see Complete).
INSERT INTO idempotency_keys (
    scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
    lease_until, expires_at, sweep_at, status, headers, body, tombstone)
VALUES (
    sqlc.arg(scope), sqlc.arg(principal), sqlc.arg(idem_key), sqlc.arg(fingerprint),
    sqlc.arg(fingerprint_version), 1, CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) * 1000,
    CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(lease_ms) AS INTEGER),
    CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(lease_ms) AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    0, x'', x'', FALSE)
ON CONFLICT (scope, principal, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    fingerprint_version = excluded.fingerprint_version,
    state = 1,
    epoch = epoch + 1,
    lease_until = excluded.lease_until,
    expires_at = excluded.expires_at,
    sweep_at = excluded.sweep_at,
    status = 0,
    headers = x'',
    body = x'',
    tombstone = FALSE
WHERE expires_at <= (julianday() - 2440587.5) * 86400000
   OR state = 3
   OR (state = 1 AND lease_until <= (julianday() - 2440587.5) * 86400000)
RETURNING epoch;

-- name: Complete :execrows
-- Complete saves the result of the attempt holding epoch; 0 rows means the
-- record moved on (fenced). The claim set sweep_at lease + ttl ahead, so a
-- completion within the lease leaves it as it is (only one after the lease
-- moves it) and the sweep index alone.
UPDATE idempotency_keys
SET state = 2,
    status = sqlc.arg(status),
    headers = sqlc.arg(headers),
    body = sqlc.arg(body),
    tombstone = sqlc.arg(tombstone),
    lease_until = CAST((julianday() - 2440587.5) * 86400000 AS INTEGER),
    expires_at = CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    sweep_at = MAX(sweep_at, CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER))
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Release :execrows
-- Release gives up the in-progress record held at epoch (state 3: claims
-- treat it as absent and continue its epoch); 0 rows means the record
-- moved on (fenced).
UPDATE idempotency_keys
SET state = 3,
    lease_until = CAST((julianday() - 2440587.5) * 86400000 AS INTEGER),
    headers = x'',
    body = x''
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Sweep :execrows
-- Sweep deletes up to batch records whose sweep time has come, oldest
-- first. sweep_at is never before expires_at, so every one has expired; a
-- record is deleted at most one lease after it expired.
DELETE FROM idempotency_keys
WHERE (scope, principal, idem_key) IN (
    SELECT scope, principal, idem_key FROM idempotency_keys
    WHERE sweep_at <= (julianday() - 2440587.5) * 86400000
      AND expires_at <= (julianday() - 2440587.5) * 86400000
    ORDER BY sweep_at
    LIMIT sqlc.arg(batch));

-- name: SweepProcessed :execrows
-- SweepProcessed deletes up to batch processed message ids older than
-- retention_ms, oldest first. A consumer's redelivery of a deleted id runs
-- again. SQLite has one writer at a time: sweepers run one after another.
DELETE FROM idempotency_keys_processed
WHERE (consumer, message_id) IN (
    SELECT consumer, message_id FROM idempotency_keys_processed
    WHERE processed_at <= (julianday() - 2440587.5) * 86400000 - CAST(sqlc.arg(retention_ms) AS INTEGER)
    ORDER BY processed_at
    LIMIT sqlc.arg(batch));

-- name: MarkProcessed :execrows
-- MarkProcessed records that consumer processed message_id; 0 rows means
-- it already had (a redelivery).
INSERT INTO idempotency_keys_processed (consumer, message_id)
VALUES (sqlc.arg(consumer), sqlc.arg(message_id))
ON CONFLICT (consumer, message_id) DO NOTHING;

-- name: AddEvent :exec
-- AddEvent writes one outbox event in the caller's transaction.
INSERT INTO idempotency_keys_outbox (event_id, topic, event_key, payload, headers, created_at)
VALUES (sqlc.arg(event_id), sqlc.arg(topic), sqlc.arg(event_key), sqlc.arg(payload), sqlc.arg(headers),
        CAST((julianday() - 2440587.5) * 86400000 AS INTEGER));

-- name: ClaimEvents :many
-- ClaimEvents leases up to batch unsent events whose lease is free, in seq
-- order, passing over an event while an earlier unsent event of its key is
-- leased (so a key's events are published in order; events with an empty
-- key have no order). SQLite has one writer at a time, so each claim sees
-- the leases of the one before.
UPDATE idempotency_keys_outbox
SET lease_until = CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) + CAST(sqlc.arg(lease_ms) AS INTEGER)
WHERE seq IN (
    SELECT c.seq FROM idempotency_keys_outbox c
    WHERE c.sent_at IS NULL
      AND (c.lease_until IS NULL OR c.lease_until <= CAST((julianday() - 2440587.5) * 86400000 AS INTEGER))
      AND (c.event_key = '' OR NOT EXISTS (
          SELECT 1 FROM idempotency_keys_outbox e
          WHERE e.event_key = c.event_key AND e.seq < c.seq AND e.sent_at IS NULL
            AND e.lease_until > CAST((julianday() - 2440587.5) * 86400000 AS INTEGER)))
    ORDER BY c.seq
    LIMIT sqlc.arg(batch))
RETURNING seq, event_id, topic, event_key, payload, headers, created_at;

-- name: MarkSent :execrows
-- MarkSent records that the events were published; events already sent
-- keep their first sent_at.
UPDATE idempotency_keys_outbox
SET sent_at = CAST((julianday() - 2440587.5) * 86400000 AS INTEGER), lease_until = NULL
WHERE event_id IN (sqlc.slice(event_ids)) AND sent_at IS NULL;

-- name: ReleaseEvents :execrows
-- ReleaseEvents ends the lease of claimed events that were not published.
UPDATE idempotency_keys_outbox
SET lease_until = NULL
WHERE event_id IN (sqlc.slice(event_ids)) AND sent_at IS NULL;

-- name: SweepSent :execrows
-- SweepSent deletes up to batch events sent more than retention_ms ago,
-- oldest first.
DELETE FROM idempotency_keys_outbox
WHERE seq IN (
    SELECT seq FROM idempotency_keys_outbox
    WHERE sent_at <= CAST((julianday() - 2440587.5) * 86400000 AS INTEGER) - CAST(sqlc.arg(retention_ms) AS INTEGER)
    ORDER BY sent_at
    LIMIT sqlc.arg(batch));

-- Code generated by idemgen (devel). DO NOT EDIT.
