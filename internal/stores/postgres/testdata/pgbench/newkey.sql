-- Generated from ../../idemgen_queries.sql with literal arguments by
-- TestPgbenchScripts (go test ./internal/stores/postgres -run Pgbench -update).
-- A first request: the store's Lookup, then its Acquire on a new key, then
-- its completion (the handler in between costs nothing here).
\set r random(1, 1000000000000)
SELECT k.epoch, k.state, k.fingerprint, k.fingerprint_version,
       (k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp())))::boolean AS live,
       (k.expires_at > statement_timestamp())::boolean AS unexpired,
       (extract(epoch FROM k.lease_until - statement_timestamp()) * 1000)::bigint AS lease_remaining_ms,
       k.status, k.headers, k.body, k.tombstone
FROM idempotency_keys k
WHERE k.scope = 'createCharge' AND k.principal = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea AND k.idem_key = (:client_id || '-' || :r);
INSERT INTO idempotency_keys AS t (
    scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
    lease_until, expires_at, sweep_at, status, headers, body, tombstone)
VALUES (
    'createCharge', '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea, (:client_id || '-' || :r), sha256('fp'),
    1, 1, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint,
    statement_timestamp() + 60000::bigint * interval '1 millisecond',
    statement_timestamp() + 86400000::bigint * interval '1 millisecond',
    statement_timestamp() + (60000::bigint + 86400000::bigint) * interval '1 millisecond',
    0, '\x'::bytea, '\x'::bytea, false)
ON CONFLICT (scope, principal, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    fingerprint_version = excluded.fingerprint_version,
    state = 1,
    epoch = t.epoch + 1,
    lease_until = excluded.lease_until,
    expires_at = excluded.expires_at,
    sweep_at = excluded.sweep_at,
    status = 0,
    headers = '\x'::bytea,
    body = '\x'::bytea,
    tombstone = false
WHERE t.expires_at <= statement_timestamp() OR t.state = 3 OR (t.state = 1 AND t.lease_until <= statement_timestamp())
RETURNING t.epoch
\gset
UPDATE idempotency_keys
SET state = 2,
    status = 201,
    headers = '\x01'::bytea,
    body = convert_to('{"id":"ch_1"}', 'UTF8'),
    tombstone = false,
    lease_until = statement_timestamp(),
    expires_at = statement_timestamp() + 86400000::bigint * interval '1 millisecond',
    sweep_at = GREATEST(sweep_at, statement_timestamp() + 86400000::bigint * interval '1 millisecond')
WHERE scope = 'createCharge' AND principal = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea AND idem_key = (:client_id || '-' || :r)
  AND epoch = :epoch AND state = 1;
