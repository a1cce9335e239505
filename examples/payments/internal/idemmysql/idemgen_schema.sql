-- Idempotency records, one per (scope, principal, key). See idemgen's
-- CONTRACT §4: a record is in progress (state 1) while an attempt holds its
-- lease, then completed (state 2) until it expires, or released (state 3):
-- absent to claims, but kept until it expires so that its epoch goes on
-- (a worker fenced out before the release stays fenced out after it).
-- Times are UTC on the database's clock, to the microsecond, never the
-- application's, and do not depend on the session's time_zone. Scope and
-- key are compared byte for byte (case-sensitive). sweep_at is when the
-- sweeper may delete the row, never before expires_at: the claim sets it
-- lease + ttl ahead, so that a completion within the lease leaves it, the
-- one indexed column that moves, as it is, and InnoDB changes no secondary
-- index entry.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope               VARBINARY(255) NOT NULL,
    principal           BINARY(32)     NOT NULL,
    idem_key            VARBINARY(255) NOT NULL,
    fingerprint         BINARY(32)     NOT NULL,
    fingerprint_version INT            NOT NULL,
    state               TINYINT        NOT NULL,
    epoch               BIGINT         NOT NULL,
    claim_token         BINARY(16)     NOT NULL,
    lease_until         DATETIME(6)    NOT NULL,
    expires_at          DATETIME(6)    NOT NULL,
    sweep_at            DATETIME(6)    NOT NULL,
    status              INT            NOT NULL DEFAULT 0,
    headers             MEDIUMBLOB     NOT NULL,
    body                MEDIUMBLOB     NOT NULL,
    tombstone           BOOLEAN        NOT NULL DEFAULT FALSE,
    PRIMARY KEY (scope, principal, idem_key),
    KEY idempotency_keys_sweep_at_idx (sweep_at)
) ENGINE = InnoDB;

-- Message consumers (CONTRACT §5): the ids each consumer has processed,
-- inserted in the same transaction as the consumer's own writes, at UTC
-- on the database's clock. The sweeper deletes those older than the store's
-- retention in processed_at order.
CREATE TABLE IF NOT EXISTS idempotency_keys_processed (
    consumer     VARBINARY(255) NOT NULL,
    message_id   VARBINARY(255) NOT NULL,
    processed_at DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (consumer, message_id),
    KEY idempotency_keys_processed_idx (processed_at)
) ENGINE = InnoDB;
