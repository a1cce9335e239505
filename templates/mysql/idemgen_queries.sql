-- name: Claim :execresult
-- Claim inserts the record of a new key, or takes over one that is expired,
-- released, or in progress with an ended lease, in one statement. MySQL applies the
-- assignments left to right, each seeing the ones before it (MariaDB too,
-- unless sql_mode has SIMULTANEOUS_ASSIGNMENT: NewStore refuses it), so the first
-- one decides: it stores this attempt's random claim_token only when the
-- record may be taken, and every later assignment tests that token instead
-- of re-reading columns already changed. A fresh row's epoch is the clock
-- in microseconds, so that a row re-created after Sweep deleted the key's
-- previous one follows every epoch that one handed out (its creation time
-- plus one per claim after); a claim of an existing row is its epoch + 1.
-- The record may be swept lease + ttl from now (see Complete).
-- Affected rows: 1 inserted (LAST_INSERT_ID() = epoch * 4), 2 taken over
-- (LAST_INSERT_ID() = new epoch * 4 + 3 if an in-progress record was taken
-- over, else new epoch * 4 + 2), 0 the record is live (read it). The VALUES
-- row sets LAST_INSERT_ID() even when the row exists, so an update that did
-- not compute a new epoch leaves a multiple of 4.
INSERT INTO idemgen_keys (
    scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
    claim_token, lease_until, expires_at, sweep_at, status, headers, body, tombstone)
VALUES (
    sqlc.arg(scope), sqlc.arg(principal), sqlc.arg(idem_key), sqlc.arg(fingerprint),
    sqlc.arg(fingerprint_version), 1,
    LAST_INSERT_ID(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) * 4) DIV 4,
    sqlc.arg(claim_token),
    (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(lease_us) MICROSECOND,
    (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(ttl_us) MICROSECOND,
    (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(lease_us) MICROSECOND + INTERVAL sqlc.arg(ttl_us) MICROSECOND,
    0, '', '', FALSE)
ON DUPLICATE KEY UPDATE
    claim_token = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) OR state = 3 OR (state = 1 AND lease_until <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)),
                     VALUES(claim_token), claim_token),
    epoch = IF(claim_token = VALUES(claim_token),
               LAST_INSERT_ID((epoch + 1) * 4 + 2 + (state = 1 AND expires_at > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND))) DIV 4,
               epoch),
    fingerprint = IF(claim_token = VALUES(claim_token), VALUES(fingerprint), fingerprint),
    fingerprint_version = IF(claim_token = VALUES(claim_token), VALUES(fingerprint_version), fingerprint_version),
    status = IF(claim_token = VALUES(claim_token), 0, status),
    headers = IF(claim_token = VALUES(claim_token), '', headers),
    body = IF(claim_token = VALUES(claim_token), '', body),
    tombstone = IF(claim_token = VALUES(claim_token), FALSE, tombstone),
    state = IF(claim_token = VALUES(claim_token), 1, state),
    lease_until = IF(claim_token = VALUES(claim_token), VALUES(lease_until), lease_until),
    expires_at = IF(claim_token = VALUES(claim_token), VALUES(expires_at), expires_at),
    sweep_at = IF(claim_token = VALUES(claim_token), VALUES(sweep_at), sweep_at);

-- name: Lookup :one
-- Lookup reads the record of a key with its liveness, measured on the
-- database's clock.
SELECT state, epoch, fingerprint, fingerprint_version, status, headers, body, tombstone,
       expires_at > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) AS unexpired,
       CAST(TIMESTAMPDIFF(MICROSECOND, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), lease_until) AS SIGNED) AS lease_remaining_us
FROM idemgen_keys
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key);

-- name: Complete :execrows
-- Complete saves the result of the attempt holding epoch; 0 rows means the
-- record moved on (fenced). The claim set sweep_at lease + ttl ahead, so a
-- completion within the lease leaves it as it is (only one after the lease
-- moves it) and changes no secondary index.
UPDATE idemgen_keys
SET state = 2,
    status = sqlc.arg(status),
    headers = sqlc.arg(headers),
    body = sqlc.arg(body),
    tombstone = sqlc.arg(tombstone),
    lease_until = (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND),
    expires_at = (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(ttl_us) MICROSECOND,
    sweep_at = GREATEST(sweep_at, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(ttl_us) MICROSECOND)
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Release :execrows
-- Release gives up the in-progress record held at epoch (state 3: claims
-- treat it as absent and continue its epoch); 0 rows means the record
-- moved on (fenced).
UPDATE idemgen_keys
SET state = 3, lease_until = (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), headers = '', body = ''
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: SweepBatch :many
-- SweepBatch locks up to batch records whose sweep time has come, oldest
-- first, for the sweeper's transaction to delete (by primary key, see
-- Store.Sweep). sweep_at is never before expires_at, so every one has
-- expired; a record is deleted at most one lease after it expired. SKIP
-- LOCKED (MySQL 8.0, MariaDB 10.6) passes over rows another sweeper or a
-- claim holds, so that sweepers running at once take different batches.
-- A DELETE cannot skip locked rows itself, hence the two statements. The
-- index is forced: when most rows have expired the optimizer would rather
-- scan and sort the table, and lock every row it reads, not just the batch.
SELECT scope, principal, idem_key FROM idemgen_keys FORCE INDEX (idemgen_keys_sweep_at_idx)
WHERE sweep_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) AND expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)
ORDER BY sweep_at
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: SweepProcessedBatch :many
-- SweepProcessedBatch locks up to batch processed message ids older than
-- retention_us, oldest first, for the sweeper to delete (see SweepBatch).
-- A consumer's redelivery of a deleted id runs again.
SELECT consumer, message_id FROM idemgen_keys_processed FORCE INDEX (idemgen_keys_processed_idx)
WHERE processed_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) - INTERVAL sqlc.arg(retention_us) MICROSECOND
ORDER BY processed_at
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: MarkProcessed :execrows
-- MarkProcessed records that consumer processed message_id; 0 rows means
-- it already had (a redelivery). INSERT IGNORE only skips the duplicate
-- here: both columns are binary and their length is checked before. The
-- time is UTC, as the sweeper's, whatever the session's time_zone.
INSERT IGNORE INTO idemgen_keys_processed (consumer, message_id, processed_at)
VALUES (sqlc.arg(consumer), sqlc.arg(message_id), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND));

-- name: AddEvent :exec
-- AddEvent writes one outbox event in the caller's transaction.
INSERT INTO idemgen_keys_outbox (event_id, topic, event_key, payload, headers, created_at)
VALUES (sqlc.arg(event_id), sqlc.arg(topic), sqlc.arg(event_key), sqlc.arg(payload), sqlc.arg(headers),
        (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND));

-- name: LockOutboxClaims :one
-- LockOutboxClaims takes the session lock that serializes the claims of
-- all relays on the table (see ClaimEvents): 1 when taken, 0 when
-- timeout_s passed.
SELECT CAST(COALESCE(GET_LOCK('idemgen:idemgen_keys_outbox', sqlc.arg(timeout_s)), 0) AS SIGNED) AS locked;

-- name: UnlockOutboxClaims :exec
-- UnlockOutboxClaims gives the claim lock back.
SELECT RELEASE_LOCK('idemgen:idemgen_keys_outbox');

-- name: SelectClaimable :many
-- SelectClaimable locks up to batch unsent events whose lease is free, in
-- seq order, passing over an event while an earlier unsent event of its
-- key is leased (so a key's events are published in order; events with an
-- empty key have no order) and over rows another session holds (SKIP
-- LOCKED: a MarkSent or sweep of another relay). LeaseEvents then leases
-- them.
SELECT c.seq, c.event_id, c.topic, c.event_key, c.payload, c.headers,
       CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', c.created_at) AS SIGNED) AS created_us
FROM idemgen_keys_outbox c FORCE INDEX (idemgen_keys_outbox_unsent)
WHERE c.sent_at IS NULL
  AND (c.lease_until IS NULL OR c.lease_until <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND))
  AND (c.event_key = '' OR NOT EXISTS (
      SELECT 1 FROM idemgen_keys_outbox e
      WHERE e.event_key = c.event_key AND e.sent_at IS NULL AND e.seq < c.seq
        AND e.lease_until > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)))
ORDER BY c.seq
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: FirstUnsent :many
-- FirstUnsent is the first unsent event of each key, read after
-- SelectClaimable in a statement of its own: under READ COMMITTED the
-- locking read sees rows committed while it ran, but its NOT EXISTS reads
-- the statement's snapshot, so an earlier event of a key committed (or
-- unlocked) during the scan may be missing there while a later one is
-- selected. ClaimEvents drops a key's selected events when its first
-- unsent event is not among them.
SELECT event_key, CAST(MIN(seq) AS SIGNED) AS first_seq
FROM idemgen_keys_outbox
WHERE sent_at IS NULL AND event_key IN (sqlc.slice(event_keys))
GROUP BY event_key;

-- name: LeaseEvents :exec
-- LeaseEvents leases the events SelectClaimable locked.
UPDATE idemgen_keys_outbox
SET lease_until = (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL sqlc.arg(lease_us) MICROSECOND
WHERE seq IN (sqlc.slice(seqs));

-- name: MarkSent :execrows
-- MarkSent records that the events were published; events already sent
-- keep their first sent_at. The unique index on event_id is forced: a
-- scan of the table (the optimizer's choice for a long list on a small
-- table) would lock every row it reads until the commit, so a claim's SKIP
-- LOCKED would pass over an unleased event of another relay and claim a
-- later event of its key (out of order).
UPDATE idemgen_keys_outbox FORCE INDEX (idemgen_keys_outbox_id)
SET sent_at = (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), lease_until = NULL
WHERE event_id IN (sqlc.slice(event_ids)) AND sent_at IS NULL;

-- name: ReleaseEvents :execrows
-- ReleaseEvents ends the lease of claimed events that were not published
-- (by the unique index on event_id, as MarkSent: it locks only them).
UPDATE idemgen_keys_outbox FORCE INDEX (idemgen_keys_outbox_id)
SET lease_until = NULL
WHERE event_id IN (sqlc.slice(event_ids)) AND sent_at IS NULL;

-- name: SweepSentBatch :many
-- SweepSentBatch locks up to batch events sent more than retention_us
-- ago, oldest first, for the sweeper to delete (DeleteEvents), skipping
-- rows another sweeper holds.
SELECT seq FROM idemgen_keys_outbox FORCE INDEX (idemgen_keys_outbox_unsent)
WHERE sent_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) - INTERVAL sqlc.arg(retention_us) MICROSECOND
ORDER BY sent_at
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: DeleteEvents :execrows
-- DeleteEvents deletes the events SweepSentBatch locked.
DELETE FROM idemgen_keys_outbox WHERE seq IN (sqlc.slice(seqs));
