-- name: Claim :one
-- Claim looks the key up and, when it is absent, expired, released, or in
-- progress with an ended lease, claims it, in one statement. A live record is
-- returned as it is (acquired = false) and nothing is written. No row means
-- a concurrent claim committed after this statement's snapshot: run it again.
WITH existing AS (
    SELECT k.state, k.epoch, k.fingerprint, k.fingerprint_version, k.lease_until,
           k.expires_at, k.status, k.headers, k.body, k.tombstone
    FROM idempotency_keys k
    WHERE k.scope = sqlc.arg(scope) AND k.principal = sqlc.arg(principal) AND k.idem_key = sqlc.arg(idem_key)
), ins AS (
    INSERT INTO idempotency_keys AS t (
        scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
        lease_until, expires_at, status, headers, body, tombstone)
    SELECT sqlc.arg(scope), sqlc.arg(principal), sqlc.arg(idem_key), sqlc.arg(fingerprint)::bytea, sqlc.arg(fingerprint_version)::integer, 1, 1,
           now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
           now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond',
           0, '\x'::bytea, '\x'::bytea, false
    WHERE NOT EXISTS (
        SELECT 1 FROM existing e
        WHERE e.expires_at > now() AND (e.state = 2 OR (e.state = 1 AND e.lease_until > now())))
    ON CONFLICT (scope, principal, idem_key) DO UPDATE SET
        fingerprint = excluded.fingerprint,
        fingerprint_version = excluded.fingerprint_version,
        state = 1,
        epoch = t.epoch + 1,
        lease_until = excluded.lease_until,
        expires_at = excluded.expires_at,
        status = 0,
        headers = '\x'::bytea,
        body = '\x'::bytea,
        tombstone = false
    WHERE t.expires_at <= now() OR t.state = 3 OR (t.state = 1 AND t.lease_until <= now())
    RETURNING t.state, t.epoch, t.fingerprint, t.fingerprint_version
)
SELECT false AS acquired,
       false AS taken_over,
       e.state, e.epoch, e.fingerprint, e.fingerprint_version,
       (extract(epoch FROM e.lease_until - now()) * 1000)::bigint AS lease_remaining_ms,
       e.status, e.headers, e.body, e.tombstone
FROM existing e
WHERE NOT EXISTS (SELECT 1 FROM ins)
  AND e.expires_at > now() AND (e.state = 2 OR (e.state = 1 AND e.lease_until > now()))
UNION ALL
SELECT true,
       EXISTS (SELECT 1 FROM existing e WHERE e.state = 1 AND e.expires_at > now()),
       i.state, i.epoch, i.fingerprint, i.fingerprint_version,
       sqlc.arg(lease_ms)::bigint,
       0, '\x'::bytea, '\x'::bytea, false
FROM ins i;

-- name: Lookup :one
-- Lookup reads the record of a key and whether it is live (unexpired, and
-- completed or within its lease) on the database's clock. A replay or a
-- conflict costs this one read; Claim runs only when it finds no live record.
SELECT k.state, k.epoch, k.fingerprint, k.fingerprint_version,
       (k.expires_at > now() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > now())))::boolean AS live,
       (extract(epoch FROM k.lease_until - now()) * 1000)::bigint AS lease_remaining_ms,
       k.status, k.headers, k.body, k.tombstone
FROM idempotency_keys k
WHERE k.scope = sqlc.arg(scope) AND k.principal = sqlc.arg(principal) AND k.idem_key = sqlc.arg(idem_key);

-- name: Complete :execrows
-- Complete saves the result of the attempt holding epoch; 0 rows means the
-- record moved on (fenced).
UPDATE idempotency_keys
SET state = 2,
    status = sqlc.arg(status),
    headers = sqlc.arg(headers),
    body = sqlc.arg(body),
    tombstone = sqlc.arg(tombstone),
    lease_until = now(),
    expires_at = now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Release :execrows
-- Release gives up the in-progress record held at epoch (state 3: claims
-- treat it as absent and continue its epoch); 0 rows means the record
-- moved on (fenced).
UPDATE idempotency_keys
SET state = 3, lease_until = now(), headers = '\x'::bytea, body = '\x'::bytea
WHERE scope = sqlc.arg(scope) AND principal = sqlc.arg(principal) AND idem_key = sqlc.arg(idem_key)
  AND epoch = sqlc.arg(epoch) AND state = 1;

-- name: Sweep :execrows
-- Sweep deletes up to batch expired records, oldest first.
DELETE FROM idempotency_keys
WHERE ctid IN (
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.expires_at <= now()
    ORDER BY k.expires_at
    LIMIT sqlc.arg(batch)::integer)
  AND expires_at <= now();

-- name: MarkProcessed :execrows
-- MarkProcessed records that consumer processed message_id; 0 rows means
-- it already had (a redelivery).
INSERT INTO idempotency_keys_processed (consumer, message_id)
VALUES (sqlc.arg(consumer), sqlc.arg(message_id))
ON CONFLICT (consumer, message_id) DO NOTHING;

-- name: ServerState :one
-- ServerState tells whether the session can write to a primary.
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') = 'on' AS read_only;
