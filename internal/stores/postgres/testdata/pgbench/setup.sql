-- Server-side comparison of the store's statements with the plain SQL of
-- BenchmarkRatio, driven by pgbench (a C client, so the numbers leave out
-- Go). Run in an empty database; see docs/performance-log.md.
\ir ../../idemgen_schema.sql
CREATE TABLE plain (id text PRIMARY KEY, body bytea NOT NULL);
INSERT INTO plain SELECT 'pre-' || g, convert_to('{"id":"ch_1","amount":100,"currency":"eur"}', 'UTF8') FROM generate_series(0, 999) g;
-- 1,000 completed records to replay.
INSERT INTO idempotency_keys (scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
                              lease_until, expires_at, sweep_at, status, headers, body)
SELECT 'createCharge', '\x0000000000000000000000000000000000000000000000000000000000000000', 'replay-' || g,
       sha256('fp'), 1, 2, 1, now(), now() + interval '1 day', now() + interval '1 day', 201,
       '\x01', convert_to('{"id":"ch_1","amount":100,"currency":"eur"}', 'UTF8')
FROM generate_series(0, 999) g;
VACUUM ANALYZE;
