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
-- principal and fingerprint are SHA-256 digests (32 bytes), and state is
-- 1, 2 or 3. There are no CHECK constraints for these: the server re-reads
-- and plans a table's CHECK constraints on every statement that writes it,
-- about a quarter of a first request's server work (docs/performance-log.md,
-- "PostgreSQL: the key table without CHECK constraints"). The statements
-- that write the table keep them instead: state is a constant in each, and
-- the claims' functions below, the only writers of the digests, refuse a
-- digest of another length (SQLSTATE 23514, as the constraint did).
CREATE TABLE IF NOT EXISTS idemgen_keys (
    scope               varchar(255) COLLATE "C" NOT NULL,
    principal           bytea        NOT NULL,
    idem_key            varchar(255) COLLATE "C" NOT NULL,
    fingerprint         bytea        NOT NULL,
    fingerprint_version integer      NOT NULL,
    state               smallint     NOT NULL,
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
-- claimed at; NULL when the record is live (nothing is written). The
-- claims (the Claim statement, idemgen_keys_claim_tx) call it only after
-- their read found no live record, so that a replay, which finds one, runs
-- a plain read: the INSERT's executor start-up (the table's and indexes'
-- locks, ON CONFLICT's set-up) then costs nothing. ON CONFLICT ... DO
-- UPDATE ... WHERE re-checks on the row under its lock (a concurrent
-- claimer is waited for and the condition evaluated on the row it
-- committed), so the caller's read decides nothing on its own. A takeover
-- moves the epoch on by one. A fresh row's epoch is the clock in
-- microseconds, so that a row re-created after Sweep deleted the key's
-- previous one follows every epoch that one handed out (its creation time
-- plus one per claim after). It may be swept lease + ttl from now (see
-- Complete). PL/pgSQL keeps the INSERT's plan for the session.
CREATE OR REPLACE FUNCTION idemgen_keys_acquire(
    p_scope varchar, p_principal bytea, p_idem_key varchar, p_fingerprint bytea,
    p_fingerprint_version integer, p_lease_ms bigint, p_ttl_ms bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    claimed bigint;
BEGIN
    IF octet_length(p_principal) <> 32 OR octet_length(p_fingerprint) <> 32 THEN
        RAISE EXCEPTION 'idemgen_keys: principal and fingerprint must be 32 bytes (SHA-256), not % and %',
            octet_length(p_principal), octet_length(p_fingerprint) USING ERRCODE = 'check_violation';
    END IF;
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

-- idemgen_keys_claim_tx claims a key inside the transaction of a
-- transactional operation (the store's BeginClaim sends it with the BEGIN,
-- in one round trip) and returns the outcome: 'acquired <epoch>',
-- 'takeover <epoch>', 'held' or 'live'. The record it inserts or takes over
-- stays uncommitted, invisible to other sessions, until the handler's
-- writes and the completion commit with it. A transaction-scoped advisory
-- lock on p_lock_key (a 64-bit hash of the key), tried without waiting,
-- comes first: every transactional claim of the key takes it before it
-- writes, so a held lock means another attempt may hold the key (held),
-- and nothing here waits on another transaction's uncommitted row. With
-- the lock, a new key is one INSERT (ON CONFLICT DO NOTHING, with the
-- fresh row of idemgen_keys_acquire): no read first. A key that has a
-- row is read, and a live record (a replay, a conflict, a reused key) is
-- left as it is (live); else idemgen_keys_acquire takes it over, and no
-- epoch back means it became live since the read (live). A claimer that
-- finds the lock taken reads the committed record: live when it is, so
-- that concurrent replays of a key, which each take the lock for a
-- moment, never answer each other as holders; else held. The outcome is
-- also set, for the transaction only, at the end of application_name
-- after p_tag: the begin query returns no rows to pgx, but the server
-- reports a change of application_name to the client (a ParameterStatus
-- message) within the same round trip. The server cuts application_name
-- to 63 bytes (it is ASCII already), so only as much of the session's own
-- name is kept as leaves the tag and the outcome whole. An acquired key's
-- transaction also gets idle_in_transaction_session_timeout = the lease: a
-- client that vanished without closing its connection (a network
-- partition) cannot hold the key past its lease, since the server then
-- ends the session. One function, not one statement of CTEs: its
-- statements' plans are kept for the session, and a new key runs the
-- INSERT alone (docs/performance-log.md, "PostgreSQL: the transactional
-- claim's server cost").
CREATE OR REPLACE FUNCTION idemgen_keys_claim_tx(
    p_tag text, p_scope varchar, p_principal bytea, p_idem_key varchar, p_lock_key bigint,
    p_lease_ms bigint, p_fingerprint bytea, p_fingerprint_version integer, p_ttl_ms bigint)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    cur record;
    claimed bigint;
    outcome text;
BEGIN
    IF octet_length(p_principal) <> 32 OR octet_length(p_fingerprint) <> 32 THEN
        RAISE EXCEPTION 'idemgen_keys: principal and fingerprint must be 32 bytes (SHA-256), not % and %',
            octet_length(p_principal), octet_length(p_fingerprint) USING ERRCODE = 'check_violation';
    END IF;
    IF pg_try_advisory_xact_lock(p_lock_key) THEN
        INSERT INTO idemgen_keys AS t (
            scope, principal, idem_key, fingerprint, fingerprint_version, state, epoch,
            lease_until, expires_at, sweep_at, status, headers, body, tombstone)
        VALUES (p_scope, p_principal, p_idem_key, p_fingerprint,
                p_fingerprint_version, 1, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint,
                statement_timestamp() + p_lease_ms * interval '1 millisecond',
                statement_timestamp() + p_ttl_ms * interval '1 millisecond',
                statement_timestamp() + (p_lease_ms + p_ttl_ms) * interval '1 millisecond',
                0, '\x'::bytea, '\x'::bytea, false)
        ON CONFLICT (scope, principal, idem_key) DO NOTHING
        RETURNING t.epoch INTO claimed;
        IF claimed IS NOT NULL THEN
            outcome := 'acquired ' || claimed;
        ELSE
            SELECT k.epoch, k.state,
                   k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp())) AS live,
                   k.expires_at > statement_timestamp() AS unexpired
            INTO cur
            FROM idemgen_keys k
            WHERE k.scope = p_scope AND k.principal = p_principal AND k.idem_key = p_idem_key;
            IF cur.live THEN
                outcome := 'live';
            ELSE
                -- No row (swept since the INSERT saw it) leaves cur's
                -- fields NULL: a fresh row, acquired.
                claimed := idemgen_keys_acquire(p_scope, p_principal, p_idem_key, p_fingerprint,
                                                p_fingerprint_version, p_lease_ms, p_ttl_ms);
                outcome := CASE WHEN claimed IS NULL THEN 'live'
                                WHEN cur.unexpired AND cur.state = 1 AND claimed = cur.epoch + 1 THEN 'takeover ' || claimed
                                ELSE 'acquired ' || claimed END;
            END IF;
        END IF;
        IF outcome <> 'live' THEN
            PERFORM set_config('idle_in_transaction_session_timeout', p_lease_ms::text, true);
        END IF;
    ELSE
        outcome := CASE WHEN EXISTS (
            SELECT FROM idemgen_keys k
            WHERE k.scope = p_scope AND k.principal = p_principal AND k.idem_key = p_idem_key
              AND k.expires_at > statement_timestamp() AND (k.state = 2 OR (k.state = 1 AND k.lease_until > statement_timestamp())))
            THEN 'live' ELSE 'held' END;
    END IF;
    PERFORM set_config('application_name',
                       left(current_setting('application_name'), greatest(0, 62 - length(p_tag || outcome)))
                       || ' ' || p_tag || outcome, true);
    RETURN outcome;
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
