-- File format: named blocks, as in queries.sql (PostgreSQL-only blocks).

-- register --
-- Insert-or-report-existing plus the capped backlog check, in one statement. The backlog is
-- counted from the in-progress partial index and never past count_limit rows. The existing
-- row is read from the statement's snapshot, so it is only a row that existed before; when a
-- concurrent registration of the same key commits first, neither the insert nor the read
-- sees a row, and the caller runs the statement again.
-- The searchable columns are read from the payload (the submission's fields): one text
-- parameter to quote and send instead of six, and the columns can never disagree with it.
-- Every parameter carries its type: the statement is prepared once per connection.
WITH backlog AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM ai_task_registry
        WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEFERRED')
        LIMIT %(count_limit)s::bigint) AS capped
), decision AS (
    SELECT n, CASE WHEN n < %(ceiling)s::bigint THEN 'PENDING'
                   WHEN %(park)s::boolean AND n < %(park_ceiling)s::bigint THEN 'DEFERRED'
              END AS status
    FROM backlog
), inserted AS (
    INSERT INTO ai_task_registry (task_key, status, source, trace_id, feature_global_id,
        attachment_global_id, event_type, payload, next_attempt_at, created_at, updated_at,
        received_at, priority)
    SELECT %(key)s::text, decision.status, p.doc ->> 'source', p.doc ->> 'trace_id',
        p.doc ->> 'feature_global_id', p.doc ->> 'attachment_global_id',
        p.doc ->> 'event_type', p.doc, %(due_at)s::double precision,
        %(now)s::double precision, %(now)s::double precision,
        %(received_at)s::double precision, %(priority)s::integer
    FROM decision, (SELECT %(payload)s::jsonb AS doc) AS p
    WHERE decision.status IS NOT NULL
    ON CONFLICT (task_key) DO NOTHING
    RETURNING status
)
SELECT (SELECT status FROM inserted) AS inserted,
       (SELECT n FROM decision) AS backlog,
       existing.status AS status,
       existing.outcome AS outcome
FROM (SELECT 1) AS one
LEFT JOIN ai_task_registry AS existing ON existing.task_key = %(key)s::text

-- claim --
-- Lease due tasks with fresh fencing tokens, critical asset types first, then the longest due;
-- rows another engine holds locked are skipped. Columns are listed (not t.*) so the prepared
-- statement survives a migration adding one.
WITH picked AS (
    SELECT task_key, next_attempt_at AS due, priority FROM ai_task_registry
    WHERE status IN ('PENDING', 'FAILED', 'DEFERRED')
      AND next_attempt_at <= %(now)s::double precision
    ORDER BY priority DESC, next_attempt_at, created_at
    LIMIT %(limit)s::bigint
    FOR UPDATE SKIP LOCKED
)
UPDATE ai_task_registry AS t
SET status = 'PROCESSING', lease_token = t.lease_token + 1, lease_owner = %(owner)s::text,
    lease_expires_at = %(expires_at)s::double precision,
    next_attempt_at = %(expires_at)s::double precision, defer_cause = NULL,
    updated_at = %(now)s::double precision
FROM picked
WHERE t.task_key = picked.task_key
RETURNING t.task_key, t.lease_token, t.lease_expires_at, t.attempt_count, t.payload,
    t.trace_id, t.source, t.created_at, t.failure_class, t.error_class, t.requeue_count,
    t.downloaded, t.analyzed, t.written, t.layer_flag, t.priority,
    (SELECT p.due FROM picked AS p WHERE p.task_key = t.task_key) AS due

-- probe_claim --
-- Take one free slot with a new token; a slot another engine is claiming right now is skipped,
-- so concurrent claimers never get the same slot (a row re-checked after a concurrent claim
-- may leave this claimer with none: it is refused and asks again later)
WITH picked AS (
    SELECT slot FROM circuit_probe
    WHERE service = %(service)s AND generation = %(generation)s AND ok IS NULL
      AND (claimed_at IS NULL OR claimed_at <= %(stale_before)s)
    ORDER BY slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE circuit_probe AS p
SET token = p.token + 1, claimed_at = %(now)s
FROM picked
WHERE p.service = %(service)s AND p.slot = picked.slot
RETURNING p.slot, p.token

-- schema_lock --
-- Serialise concurrent schema initialisation (released at commit)
SELECT pg_advisory_xact_lock(7239400118)

-- has_schema_version --
-- Whether the schema has ever been initialised
SELECT count(*) AS n FROM pg_catalog.pg_tables
WHERE tablename = 'schema_version' AND schemaname = ANY (current_schemas(false))

-- clear --
-- Delete every row of every table but schema_version (tests and drills; DELETE, not
-- TRUNCATE: cheaper on the small tables tests leave, and no exclusive lock)
DELETE FROM ai_task_registry;
DELETE FROM circuit_state;
DELETE FROM circuit_probe;
DELETE FROM degradation_state;
DELETE FROM ai_call_log;
DELETE FROM format_anomaly;
DELETE FROM resilience_config;
DELETE FROM analysis_cache;
DELETE FROM notification;
DELETE FROM asset_condition;
DELETE FROM intake_counter;
DELETE FROM intake_refusal;
DELETE FROM analysis_claim;
DELETE FROM call_pace;
DELETE FROM call_limit;
DELETE FROM call_slot;
DELETE FROM metric_counter;
DELETE FROM metric_histogram;

-- session_setup --
-- Run once per connection. The in-progress partial indexes churn (every task passes through
-- them and leaves); a plain index scan marks the dead entries it meets so later scans skip
-- them, a bitmap scan never does and would revisit every dead row until VACUUM. None of the
-- ledger's queries needs a bitmap scan.
SET enable_bitmapscan = off

-- completed_since_rows --
-- Tasks finished since a time: end-to-end times, whether the analysis was reused and whether
-- the task went into the review queue
SELECT created_at, completed_at, status, outcome, failure_class, review_state,
       coalesce((result ->> 'reused')::boolean, false) AS reused
FROM ai_task_registry
WHERE completed_at >= %(since)s
ORDER BY completed_at DESC
LIMIT %(limit)s

-- existing_keys --
-- Which of the given keys (a JSON array) the ledger holds
SELECT task_key FROM ai_task_registry
WHERE task_key IN (SELECT jsonb_array_elements_text(%(keys)s::jsonb))
-- session_limits --
-- Run once per connection, after session_setup: no statement runs, and no lock is waited for,
-- longer than the store's settings allow (either cancellation is StoreUnavailable)
SELECT set_config('statement_timeout', %(statement_timeout)s, false),
       set_config('lock_timeout', %(lock_timeout)s, false)

-- migration_limits --
-- A migration may build an index over a large table and waits its turn behind a concurrent
-- initialisation (the advisory schema_lock): no time limits for its transaction. The
-- operations queued behind its locks still give up at their own lock_timeout.
SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', '0', true)

-- terminate_other_sessions --
-- Cut every other connection to this database, as a restart or a failover does (the drill's
-- chaos; an operator's last resort). Returns one row per connection cut.
SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()

-- limit_lock --
-- A service's concurrency limit, read to be changed: the row is locked until the transaction
-- ends, so the calls in flight counted after it are every committed one (READ COMMITTED gives
-- each statement a new snapshot) and two engines never both take the last free slot
SELECT limit_value, ttfb_s, rtt_long_s, rtt_peak_s FROM call_limit WHERE service = %(service)s
FOR UPDATE
