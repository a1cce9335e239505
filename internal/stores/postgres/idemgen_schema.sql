-- Idempotency records, one per (scope, principal, key). See idemgen's
-- CONTRACT §4: a record is in progress (state 1) while an attempt holds its
-- lease, then completed (state 2) until it expires, or released (state 3):
-- absent to claims, but kept until it expires so that its epoch goes on
-- (a worker fenced out before the release stays fenced out after it).
-- Every time in this table comes from the database's clock. sweep_at is
-- when the sweeper may delete the row, never before expires_at: the claim
-- sets it lease + ttl ahead, so that a completion within the lease leaves
-- it, the one indexed column that moves, as it is, and the completion is a
-- heap-only (HOT) update that adds no index entries.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope               varchar(255) COLLATE "C" NOT NULL,
    principal           bytea        NOT NULL CHECK (octet_length(principal) = 32),
    idem_key            varchar(255) COLLATE "C" NOT NULL,
    fingerprint         bytea        NOT NULL CHECK (octet_length(fingerprint) = 32),
    fingerprint_version integer      NOT NULL,
    state               smallint     NOT NULL CHECK (state IN (1, 2, 3)),
    epoch               bigint       NOT NULL,
    lease_until         timestamptz  NOT NULL,
    expires_at          timestamptz  NOT NULL,
    sweep_at            timestamptz  NOT NULL,
    status              integer      NOT NULL DEFAULT 0,
    headers             bytea        NOT NULL DEFAULT '\x',
    body                bytea        NOT NULL DEFAULT '\x',
    tombstone           boolean      NOT NULL DEFAULT false,
    PRIMARY KEY (scope, principal, idem_key)
);

-- The sweeper deletes expired records in sweep_at order, in bounded batches.
CREATE INDEX IF NOT EXISTS idempotency_keys_sweep_at_idx ON idempotency_keys (sweep_at);

-- Message consumers (CONTRACT §5): the ids each consumer has processed,
-- inserted in the same transaction as the consumer's own writes.
CREATE TABLE IF NOT EXISTS idempotency_keys_processed (
    consumer     bytea       NOT NULL,
    message_id   bytea       NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (consumer, message_id)
);

-- The sweeper deletes processed ids older than the store's retention in
-- processed_at order, in bounded batches.
CREATE INDEX IF NOT EXISTS idempotency_keys_processed_idx ON idempotency_keys_processed (processed_at);
