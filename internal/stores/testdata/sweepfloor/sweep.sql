-- sweep.sql: one sweeper batch for pgbench, the store's Sweep statement
-- (internal/stores/postgres/idemgen_queries.sql, "name: Sweep") as sqlc
-- sends it, with the batch size in :batch (pgbench -D batch=500; with
-- -M prepared it is the statement's $1, as pgx sends it).
DELETE FROM idempotency_keys
WHERE ctid IN (
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.sweep_at <= statement_timestamp() AND k.expires_at <= statement_timestamp()
    ORDER BY k.sweep_at
    LIMIT :batch::integer
    FOR UPDATE SKIP LOCKED)
  AND sweep_at <= statement_timestamp() AND expires_at <= statement_timestamp();
