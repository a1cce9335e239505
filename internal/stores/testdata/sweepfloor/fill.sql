-- fill.sql: empties idempotency_keys (the store's table, created from
-- internal/stores/postgres/idemgen_schema.sql) and fills it with :rows
-- completed records that expired an hour ago, one millisecond of sweep_at
-- apart, in sweep_at order as claims would insert them; then VACUUM
-- ANALYZE, so that every run starts from the same table.
--   psql -v rows=200000 -f fill.sql
TRUNCATE idempotency_keys;
INSERT INTO idempotency_keys (
    scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
    lease_until, expires_at, sweep_at, status, headers, body, tombstone)
SELECT 'sweepfloor', sha256(('principal-' || (i % 100))::bytea), 'key-' || i,
       sha256(('fingerprint-' || i)::bytea), 2, 2, i,
       now() - interval '2 hours',
       now() - interval '1 hour' + i * interval '1 millisecond',
       now() - interval '1 hour' + i * interval '1 millisecond',
       201, '\x'::bytea, convert_to('{"id":"ch_' || i || '","amount":100,"currency":"eur"}', 'UTF8'), false
FROM generate_series(1, :rows) AS i;
VACUUM ANALYZE idempotency_keys;
