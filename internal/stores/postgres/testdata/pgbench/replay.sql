-- Generated from ../../idemgen_queries.sql with literal arguments by
-- TestPgbenchScripts (go test ./internal/stores/postgres -run Pgbench -update).
-- A replay: the store's Lookup statement on a completed key.
\set k random(0, 999)
SELECT k.epoch, k.state, k.fingerprint, k.fingerprint_version,
       (k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp())))::boolean AS live,
       (k.expires_at > statement_timestamp())::boolean AS unexpired,
       (extract(epoch FROM k.lease_until - statement_timestamp()) * 1000)::bigint AS lease_remaining_ms,
       k.status, k.headers, k.body, k.tombstone
FROM idempotency_keys k
WHERE k.scope = 'createCharge' AND k.principal = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea AND k.idem_key = 'replay-' || :k;
