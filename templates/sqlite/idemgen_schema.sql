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

-- The transactional outbox: events a handler adds in its own transaction
-- (AddEvents), published by a relay (idemrt.Relay over the Store's
-- ClaimEvents, MarkSent, ReleaseEvents, SweepSent). seq orders the events;
-- a claim leases a batch until lease_until; sent rows are swept once
-- sent_at is older than the relay's retention. Times are Unix
-- milliseconds on the database's clock.
CREATE TABLE IF NOT EXISTS idemgen_keys_outbox (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT    NOT NULL CHECK (length(CAST(event_id AS BLOB)) <= 255),
    topic       TEXT    NOT NULL CHECK (length(CAST(topic AS BLOB)) <= 255),
    event_key   TEXT    NOT NULL CHECK (length(CAST(event_key AS BLOB)) <= 255),
    payload     BLOB    NOT NULL,
    headers     BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    lease_until INTEGER,
    sent_at     INTEGER
);

-- The event id is the broker's message id: unique.
CREATE UNIQUE INDEX IF NOT EXISTS idemgen_keys_outbox_id ON idemgen_keys_outbox (event_id);
-- A claim reads the unsent events in seq order, and looks for an earlier
-- leased event of the same key; the sweeper reads sent events by sent_at.
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_unsent ON idemgen_keys_outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_key ON idemgen_keys_outbox (event_key, seq) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_sent ON idemgen_keys_outbox (sent_at) WHERE sent_at IS NOT NULL;
