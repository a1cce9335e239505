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
CREATE TABLE IF NOT EXISTS idemgen_keys (
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
    KEY idemgen_keys_sweep_at_idx (sweep_at)
) ENGINE = InnoDB;

-- Message consumers (CONTRACT §5): the ids each consumer has processed,
-- inserted in the same transaction as the consumer's own writes, at UTC
-- on the database's clock. The sweeper deletes those older than the store's
-- retention in processed_at order.
CREATE TABLE IF NOT EXISTS idemgen_keys_processed (
    consumer     VARBINARY(255) NOT NULL,
    message_id   VARBINARY(255) NOT NULL,
    processed_at DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (consumer, message_id),
    KEY idemgen_keys_processed_idx (processed_at)
) ENGINE = InnoDB;

-- The transactional outbox: events a handler adds in its own transaction
-- (AddEvents), published by a relay (idemrt.Relay over the Store's
-- ClaimEvents, MarkSent, ReleaseEvents, SweepSent). seq orders the events;
-- a claim leases a batch until lease_until; sent rows are swept once
-- sent_at is older than the relay's retention. Times are UTC, on the
-- database's clock. The event id is the broker's message id: unique. A
-- claim reads unsent events (sent_at NULL) in seq order and looks for an
-- earlier leased event of the same key; the sweeper reads sent events by
-- sent_at.
CREATE TABLE IF NOT EXISTS idemgen_keys_outbox (
    seq         BIGINT         NOT NULL AUTO_INCREMENT,
    event_id    VARBINARY(255) NOT NULL,
    topic       VARBINARY(255) NOT NULL,
    event_key   VARBINARY(255) NOT NULL,
    payload     LONGBLOB       NOT NULL,
    headers     BLOB           NOT NULL,
    created_at  DATETIME(6)    NOT NULL,
    lease_until DATETIME(6)    NULL,
    sent_at     DATETIME(6)    NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY idemgen_keys_outbox_id (event_id),
    KEY idemgen_keys_outbox_unsent (sent_at, seq),
    KEY idemgen_keys_outbox_key (event_key, sent_at, seq)
) ENGINE = InnoDB;
