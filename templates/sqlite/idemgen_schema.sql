-- Idempotency records, one per (scope, principal, key). See idemgen's
-- CONTRACT §4: a record is in progress (state 1) while an attempt holds its
-- lease, then completed (state 2) until it expires, or released (state 3):
-- absent to claims, but kept until it expires so that its epoch goes on
-- (a worker fenced out before the release stays fenced out after it).
-- Times are milliseconds since the Unix epoch on the database's clock
-- (julianday('now')), never the application's. WITHOUT ROWID: a lookup by
-- key is one B-tree descent rather than the key's index and then the table.
-- sweep_at is when the sweeper may delete the row, never before expires_at:
-- the claim sets it lease + ttl ahead, so that a completion within the
-- lease leaves it, the one indexed column that moves, as it is, and the
-- sweep index is not rewritten.
CREATE TABLE IF NOT EXISTS idemgen_keys (
    scope               TEXT    NOT NULL CHECK (length(scope) <= 255),
    principal           BLOB    NOT NULL CHECK (length(principal) = 32),
    idem_key            TEXT    NOT NULL CHECK (length(idem_key) <= 255),
    fingerprint         BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    fingerprint_version INTEGER NOT NULL,
    state               INTEGER NOT NULL CHECK (state IN (1, 2, 3)),
    epoch               INTEGER NOT NULL,
    lease_until         INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    sweep_at            INTEGER NOT NULL,
    status              INTEGER NOT NULL DEFAULT 0,
    headers             BLOB    NOT NULL DEFAULT x'',
    body                BLOB    NOT NULL DEFAULT x'',
    tombstone           BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (scope, principal, idem_key)
) WITHOUT ROWID;

-- The sweeper deletes expired records in sweep_at order, in bounded batches.
CREATE INDEX IF NOT EXISTS idemgen_keys_sweep_at_idx ON idemgen_keys (sweep_at);

-- Message consumers (CONTRACT §5): the ids each consumer has processed,
-- inserted in the same transaction as the consumer's own writes.
CREATE TABLE IF NOT EXISTS idemgen_keys_processed (
    consumer     BLOB    NOT NULL,
    message_id   BLOB    NOT NULL,
    processed_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;

-- The sweeper deletes processed ids older than the store's retention in
-- processed_at order, in bounded batches.
CREATE INDEX IF NOT EXISTS idemgen_keys_processed_idx ON idemgen_keys_processed (processed_at);
