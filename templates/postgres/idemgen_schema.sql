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
CREATE TABLE IF NOT EXISTS idemgen_keys (
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
CREATE INDEX IF NOT EXISTS idemgen_keys_sweep_at_idx ON idemgen_keys (sweep_at);

-- idemgen_keys_acquire claims a key whose record is absent, expired,
-- released, or in progress with an ended lease, and returns the epoch it
-- claimed at; NULL when the record is live (nothing is written). The claim
-- statements (Claim, ClaimTx) call it only after their read found no live
-- record, so that a replay, which finds one, runs a plain read: the
-- INSERT's executor start-up (the table's and indexes' locks, ON CONFLICT's
-- set-up) then costs nothing. ON CONFLICT ... DO UPDATE ... WHERE
-- re-checks on the row under its lock (a concurrent claimer is waited for
-- and the condition evaluated on the row it committed), so the caller's
-- read decides nothing on its own. A takeover moves the epoch on by one. A
-- fresh row's epoch is the clock in microseconds, so that a row re-created
-- after Sweep deleted the key's previous one follows every epoch that one
-- handed out (its creation time plus one per claim after). It may be swept
-- lease + ttl from now (see Complete). PL/pgSQL keeps the INSERT's plan
-- for the session.
CREATE OR REPLACE FUNCTION idemgen_keys_acquire(
    p_scope varchar, p_principal bytea, p_idem_key varchar, p_fingerprint bytea,
    p_fingerprint_version integer, p_lease_ms bigint, p_ttl_ms bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    claimed bigint;
BEGIN
    INSERT INTO idemgen_keys AS t (
        scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
        lease_until, expires_at, sweep_at, status, headers, body, tombstone)
    VALUES (p_scope, p_principal, p_idem_key, p_fingerprint,
            p_fingerprint_version, 1, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint,
            statement_timestamp() + p_lease_ms * interval '1 millisecond',
            statement_timestamp() + p_ttl_ms * interval '1 millisecond',
            statement_timestamp() + (p_lease_ms + p_ttl_ms) * interval '1 millisecond',
            0, '\x'::bytea, '\x'::bytea, false)
    ON CONFLICT (scope, principal, idem_key) DO UPDATE SET
        fingerprint = excluded.fingerprint,
        fingerprint_version = excluded.fingerprint_version,
        state = 1,
        epoch = t.epoch + 1,
        lease_until = excluded.lease_until,
        expires_at = excluded.expires_at,
        sweep_at = excluded.sweep_at,
        status = 0,
        headers = '\x'::bytea,
        body = '\x'::bytea,
        tombstone = false
    WHERE t.expires_at <= statement_timestamp() OR t.state = 3 OR (t.state = 1 AND t.lease_until <= statement_timestamp())
    RETURNING t.epoch INTO claimed;
    RETURN claimed;
END
$$;

-- Message consumers (CONTRACT §5): the ids each consumer has processed,
-- inserted in the same transaction as the consumer's own writes.
CREATE TABLE IF NOT EXISTS idemgen_keys_processed (
    consumer     bytea       NOT NULL,
    message_id   bytea       NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (consumer, message_id)
);

-- The sweeper deletes processed ids older than the store's retention in
-- processed_at order, in bounded batches.
CREATE INDEX IF NOT EXISTS idemgen_keys_processed_idx ON idemgen_keys_processed (processed_at);

-- The transactional outbox: events a handler adds in its own transaction
-- (AddEvents), published by a relay (idemrt.Relay over the Store's
-- ClaimEvents, MarkSent, ReleaseEvents, SweepSent). seq orders the events;
-- a claim leases a batch until lease_until; sent rows are swept once
-- sent_at is older than the relay's retention. Times are the database's.
CREATE TABLE IF NOT EXISTS idemgen_keys_outbox (
    seq         bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    varchar(255) COLLATE "C" NOT NULL,
    topic       varchar(255) COLLATE "C" NOT NULL,
    event_key   varchar(255) COLLATE "C" NOT NULL,
    payload     bytea        NOT NULL,
    headers     bytea        NOT NULL,
    created_at  timestamptz  NOT NULL DEFAULT statement_timestamp(),
    lease_until timestamptz,
    sent_at     timestamptz
);

-- The event id is the broker's message id: unique.
CREATE UNIQUE INDEX IF NOT EXISTS idemgen_keys_outbox_id ON idemgen_keys_outbox (event_id);
-- A claim reads the unsent events in seq order, and looks for an earlier
-- leased event of the same key; the sweeper reads sent events by sent_at.
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_unsent ON idemgen_keys_outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_key ON idemgen_keys_outbox (event_key, seq) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS idemgen_keys_outbox_sent ON idemgen_keys_outbox (sent_at) WHERE sent_at IS NOT NULL;
