-- name: Lookup :one
-- Lookup reads the live record of a key, its liveness measured on the
-- database's clock: in transactional mode, the record ClaimTx found live,
-- read after the ROLLBACK of ClaimTx's transaction in the same round
-- trip. No row means the record is no longer live (or was swept since): it
-- is claimed again. As Claim's, its select list holds no more expressions
-- than it needs (the server builds them on every execution): liveness is a
-- condition of the read, and the lease left an interval.
SELECT k.epoch, k.state, k.fingerprint, k.fingerprint_version,
       (k.lease_until - statement_timestamp())::interval AS lease_remaining,
       k.status, k.headers, k.body, k.tombstone
FROM idempotency_keys k
WHERE k.scope = sqlc.arg(scope) AND k.principal = sqlc.arg(principal) AND k.idem_key = sqlc.arg(idem_key)
  AND k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp()));

-- name: Claim :one
-- Claim reads the record of a key and, when it is absent, expired,
-- released, or in progress with an ended lease, claims it, in one
-- statement: a first request's claim and a replay or a conflict are each
-- one round trip. The record is a plain primary-key read (a LEFT JOIN, so
-- that an absent key still gives one row), with its liveness measured on
-- the database's clock once, in the CASE: when it is live, epoch is 0 and
-- nothing else runs: a replay costs the read alone. Otherwise
-- idempotency_keys_acquire (idemgen_schema.sql) claims the key with an upsert
-- that re-checks everything on the row under its lock, so the read decides
-- nothing on its own (the CASE calls it only when its condition holds),
-- and returns the new epoch, never 0 or less (a fresh row's is the clock
-- in microseconds); -1 means it found the record live after all: another
-- attempt claimed the key after this statement's snapshot, so run it
-- again. The server builds every expression of the select list on every
-- execution, called or not, and each function or operator in it costs a
-- catalog look-up: so liveness is computed once, lease_remaining is an
-- interval (no numeric arithmetic), and unexpired, which only a takeover
-- needs, is one comparison (docs/performance-log.md, "PostgreSQL: a
-- replay's read, counted on both sides"). There is no CTE: a WITH query
-- that calls a volatile function is materialised on every call, which
-- cost a replay about as much again as the read itself.
SELECT (CASE WHEN k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp())) THEN 0
             ELSE COALESCE(idempotency_keys_acquire(sqlc.arg(scope)::varchar, sqlc.arg(principal)::bytea, sqlc.arg(idem_key)::varchar,
                                                sqlc.arg(fingerprint)::bytea, sqlc.arg(fingerprint_version)::integer,
                                                sqlc.arg(lease_ms)::bigint, sqlc.arg(ttl_ms)::bigint), -1)
        END)::bigint AS epoch,
       k.epoch AS record_epoch, k.state, k.fingerprint, k.fingerprint_version,
       COALESCE(k.expires_at > statement_timestamp(), false)::boolean AS unexpired,
       (k.lease_until - statement_timestamp())::interval AS lease_remaining,
       k.status, k.headers, k.body, k.tombstone
FROM (SELECT) AS one
LEFT JOIN idempotency_keys k
    ON k.scope = sqlc.arg(scope) AND k.principal = sqlc.arg(principal) AND k.idem_key = sqlc.arg(idem_key);

-- name: ClaimTx :one
-- ClaimTx claims a key inside the transaction of a transactional operation
-- (BeginClaim), in the round trip of its BEGIN, with the schema's
-- idempotency_keys_claim_tx (idemgen_schema.sql), which says what it does:
-- the outcome, "acquired <epoch>", "takeover <epoch>", "held" or "live",
-- comes back at the end of application_name after tag, since pgx's BeginTx
-- returns no rows.
SELECT idempotency_keys_claim_tx(sqlc.arg(tag)::text, sqlc.arg(scope)::varchar, sqlc.arg(principal)::bytea,
                             sqlc.arg(idem_key)::varchar, sqlc.arg(lock_key)::bigint, sqlc.arg(lease_ms)::bigint,
                             sqlc.arg(fingerprint)::bytea, sqlc.arg(fingerprint_version)::integer,
                             sqlc.arg(ttl_ms)::bigint)::text AS claim;

-- name: HolderLease :one
-- HolderLease is the lease left, in milliseconds, of the transactional
-- attempt that holds a key's advisory lock (ClaimTx found it taken; read
-- after the ROLLBACK of ClaimTx's transaction, in one round trip), for
-- the Retry-After of a duplicate in another process: the holder's
-- transaction began just after its lease did, so its start plus the lease
-- is the lease's end (a few milliseconds late at most). 0 when no holder
-- can be seen (it ended since, or it is another role's session and this
-- role lacks pg_read_all_stats).
SELECT COALESCE(max(extract(epoch FROM a.xact_start + sqlc.arg(lease_ms)::bigint * interval '1 millisecond' - clock_timestamp()) * 1000), 0)::bigint AS remaining_ms
FROM pg_catalog.pg_locks l
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = ((sqlc.arg(lock_key)::bigint >> 32) & 4294967295)::oid
  AND l.objid = (sqlc.arg(lock_key)::bigint & 4294967295)::oid;

-- name: Complete :execrows
-- Complete saves the result of the attempt holding epoch; 0 rows means the
-- record moved on (fenced). It may run in the handler's transaction, where
-- the transaction timestamp is its start: every time here is
-- statement_timestamp(), so the TTL counts from the completion. The claim
-- set sweep_at lease + ttl ahead, so a completion within the lease leaves it
-- as it is (only one after the lease moves it): no indexed column changes,
-- and the update is heap-only (HOT) when the row's page has room for the
-- new version.
UPDATE idempotency_keys
SET state = 2,
    status = sqlc.arg(status),
    headers = sqlc.arg(headers),
    body = sqlc.arg(body),
    tombstone = sqlc.arg(tombstone),
    lease_until = statement_timestamp(),
    expires_at = statement_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond',
    sweep_at = GREATEST(sweep_at, statement_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond')
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: CompleteTx :one
-- CompleteTx is Complete inside the transaction that holds the claim
-- (BeginClaim), sent in one round trip with the COMMIT. The claim's row is
-- this transaction's own, so it matches; were it not to, the division by
-- zero fails the statement, the transaction aborts, and the COMMIT behind
-- it rolls back instead: the handler's writes never commit without their
-- record.
WITH done AS (
    UPDATE idempotency_keys
    SET state = 2,
        status = sqlc.arg(status),
        headers = sqlc.arg(headers),
        body = sqlc.arg(body),
        tombstone = sqlc.arg(tombstone),
        lease_until = statement_timestamp(),
        expires_at = statement_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond',
        sweep_at = GREATEST(sweep_at, statement_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond')
    WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
      AND epoch = sqlc.arg(epoch) AND state = 1
    RETURNING 1
)
SELECT (1 / (SELECT count(*) FROM done))::integer AS completed;

-- name: Release :execrows
-- Release gives up the in-progress record held at epoch (state 3: claims
-- treat it as absent and continue its epoch); 0 rows means the record
-- moved on (fenced).
UPDATE idempotency_keys
SET state = 3, lease_until = statement_timestamp(), headers = '\x'::bytea, body = '\x'::bytea
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Sweep :execrows
-- Sweep deletes up to batch records whose sweep time has come, oldest
-- first. sweep_at is never before expires_at, so every one has expired; a
-- record is deleted at most one lease after it expired. SKIP LOCKED passes
-- over rows another sweeper (or a claim) holds, so that sweepers running
-- at once delete different batches instead of queueing behind one.
DELETE FROM idempotency_keys
WHERE ctid IN (
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.sweep_at <= statement_timestamp() AND k.expires_at <= statement_timestamp()
    ORDER BY k.sweep_at
    LIMIT sqlc.arg(batch)::integer
    FOR UPDATE SKIP LOCKED)
  AND sweep_at <= statement_timestamp() AND expires_at <= statement_timestamp();

-- name: SweepProcessed :execrows
-- SweepProcessed deletes up to batch processed message ids older than
-- retention_ms, oldest first, skipping rows another sweeper holds (see
-- Sweep). A consumer's redelivery of a deleted id runs again.
DELETE FROM idempotency_keys_processed
WHERE ctid IN (
    SELECT p.ctid FROM idempotency_keys_processed p
    WHERE p.processed_at <= statement_timestamp() - sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
    ORDER BY p.processed_at
    LIMIT sqlc.arg(batch)::integer
    FOR UPDATE SKIP LOCKED);

-- name: MarkProcessed :execrows
-- MarkProcessed records that consumer processed message_id; 0 rows means
-- it already had (a redelivery).
INSERT INTO idempotency_keys_processed (consumer, message_id, processed_at)
VALUES (sqlc.arg(consumer), sqlc.arg(message_id), statement_timestamp())
ON CONFLICT (consumer, message_id) DO NOTHING;

-- name: ServerState :one
-- ServerState tells whether the session can write to a primary, whether
-- the schema has the claims' functions (idemgen_schema.sql), which a
-- schema applied by an earlier version lacks, which of tables do not exist
-- (found as the statements find them, through search_path), and which
-- have no unique index on exactly the columns key_columns[i] (', '
-- separated) of tables[i] that ON CONFLICT can use and that tells keys
-- apart as the statements do: valid, not partial, not deferrable, on the
-- plain columns (INCLUDE columns aside), in any order, with no
-- nondeterministic collation (one that merges 'K' and 'k').
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') = 'on' AS read_only,
       (to_regprocedure('idempotency_keys_acquire(varchar, bytea, varchar, bytea, integer, bigint, bigint)') IS NOT NULL)::boolean AS has_acquire,
       (to_regprocedure('idempotency_keys_claim_tx(text, varchar, bytea, varchar, bigint, bigint, bytea, integer, bigint)') IS NOT NULL)::boolean AS has_claim_tx,
       ARRAY(SELECT t FROM unnest(sqlc.arg(tables)::text[]) AS t WHERE to_regclass(t) IS NULL)::text[] AS absent_tables,
       ARRAY(SELECT w.t FROM unnest(sqlc.arg(tables)::text[]) WITH ORDINALITY AS w(t, n)
             WHERE to_regclass(w.t) IS NOT NULL AND NOT EXISTS (
                 SELECT FROM pg_catalog.pg_index i
                 WHERE i.indrelid = to_regclass(w.t)
                   AND i.indisunique AND i.indisvalid AND i.indimmediate
                   AND i.indpred IS NULL AND i.indexprs IS NULL
                   AND NOT EXISTS (SELECT FROM pg_catalog.pg_collation c
                                   WHERE c.oid = ANY (i.indcollation::oid[]) AND NOT c.collisdeterministic)
                   AND ARRAY(SELECT a.attname::text COLLATE "C" FROM pg_catalog.pg_attribute a
                             WHERE a.attrelid = i.indrelid AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])
                             ORDER BY 1)
                       = ARRAY(SELECT c COLLATE "C" FROM unnest(string_to_array((sqlc.arg(key_columns)::text[])[w.n], ', ')) AS c ORDER BY 1)))::text[] AS unkeyed_tables;

-- name: AddEvent :exec
-- AddEvent writes one outbox event in the caller's transaction.
INSERT INTO idempotency_keys_outbox (event_id, topic, event_key, payload, headers, created_at)
VALUES (sqlc.arg(event_id), sqlc.arg(topic), sqlc.arg(event_key), sqlc.arg(payload), sqlc.arg(headers), statement_timestamp());

-- name: LockOutboxClaims :exec
-- LockOutboxClaims serializes the claims of all relays on the table until
-- the end of the transaction, so that each claim sees the leases of the
-- previous one (see ClaimEvents).
SELECT pg_advisory_xact_lock(hashtext('idemgen:idempotency_keys_outbox'));

-- name: ClaimEvents :many
-- ClaimEvents leases up to batch unsent events whose lease is free, in seq
-- order, passing over an event while an earlier unsent event of its key is
-- leased (so a key's events are published in order; events with an empty
-- key have no order) and over rows another
-- session holds (SKIP LOCKED: a MarkSent or sweep of another relay).
UPDATE idempotency_keys_outbox o
SET lease_until = statement_timestamp() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
WHERE o.seq IN (
    SELECT c.seq FROM idempotency_keys_outbox c
    WHERE c.sent_at IS NULL
      AND (c.lease_until IS NULL OR c.lease_until <= statement_timestamp())
      AND (c.event_key = '' OR NOT EXISTS (
          SELECT 1 FROM idempotency_keys_outbox e
          WHERE e.event_key = c.event_key AND e.seq < c.seq AND e.sent_at IS NULL
            AND e.lease_until > statement_timestamp()))
    ORDER BY c.seq
    LIMIT sqlc.arg(batch)::integer
    FOR UPDATE SKIP LOCKED)
RETURNING o.seq, o.event_id, o.topic, o.event_key, o.payload, o.headers, o.created_at;

-- name: MarkSent :execrows
-- MarkSent records that the events were published; events already sent
-- keep their first sent_at.
UPDATE idempotency_keys_outbox
SET sent_at = statement_timestamp(), lease_until = NULL
WHERE event_id = ANY(sqlc.arg(event_ids)::text[]) AND sent_at IS NULL;

-- name: ReleaseEvents :execrows
-- ReleaseEvents ends the lease of claimed events that were not published.
UPDATE idempotency_keys_outbox
SET lease_until = NULL
WHERE event_id = ANY(sqlc.arg(event_ids)::text[]) AND sent_at IS NULL;

-- name: SweepSent :execrows
-- SweepSent deletes up to batch events sent more than retention_ms ago,
-- oldest first, skipping rows another sweeper holds.
DELETE FROM idempotency_keys_outbox
WHERE seq IN (
    SELECT s.seq FROM idempotency_keys_outbox s
    WHERE s.sent_at <= statement_timestamp() - sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
    ORDER BY s.sent_at
    LIMIT sqlc.arg(batch)::integer
    FOR UPDATE SKIP LOCKED);

-- Code generated by idemgen (devel). DO NOT EDIT.
