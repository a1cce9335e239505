-- Generated from ../../idemgen_queries.sql with literal arguments by
-- TestPgbenchScripts (go test ./internal/stores/postgres -run Pgbench -update).
-- A replay: the store's Claim statement on a completed key.
\set k random(0, 999)
WITH cur AS (
    SELECT k.state, k.epoch, k.fingerprint, k.fingerprint_version, k.lease_until, k.expires_at,
           k.status, k.headers, k.body, k.tombstone
    FROM idempotency_keys k
    WHERE k.scope = 'createCharge' AND k.principal = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea AND k.idem_key = 'replay-' || :k
), ins AS (
    INSERT INTO idempotency_keys (
        scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch, lease_until, expires_at, sweep_at)
    SELECT 'createCharge', '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea, 'replay-' || :k, sha256('fp')::bytea,
           1::integer, 1, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint,
           statement_timestamp() + 60000::bigint * interval '1 millisecond',
           statement_timestamp() + 86400000::bigint * interval '1 millisecond',
           statement_timestamp() + (60000::bigint + 86400000::bigint) * interval '1 millisecond'
    WHERE NOT EXISTS (SELECT FROM cur)
    ON CONFLICT (scope, principal, idem_key) DO NOTHING
    RETURNING epoch
)
SELECT false AS acquired, cur.epoch, cur.state, cur.fingerprint, cur.fingerprint_version,
       (cur.expires_at > statement_timestamp() AND (cur.state = 2 OR (cur.state = 1 AND cur.lease_until > statement_timestamp())))::boolean AS live,
       (cur.expires_at > statement_timestamp())::boolean AS unexpired,
       (extract(epoch FROM cur.lease_until - statement_timestamp()) * 1000)::bigint AS lease_remaining_ms,
       cur.status, cur.headers, cur.body, cur.tombstone
FROM cur
UNION ALL
SELECT true, ins.epoch, 1::smallint, '\x'::bytea, 0, false, true, 0::bigint, 0, '\x'::bytea, '\x'::bytea, false
FROM ins;
