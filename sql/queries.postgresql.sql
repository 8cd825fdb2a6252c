-- File format: named blocks, as in queries.sql (PostgreSQL-only blocks).

-- register --
-- Insert-or-report-existing plus the capped backlog check, in one statement. The backlog is
-- counted from the in-progress partial index and never past count_limit rows. The existing
-- row is read from the statement's snapshot, so it is only a row that existed before; when a
-- concurrent registration of the same key commits first, neither the insert nor the read
-- sees a row, and the caller runs the statement again.
WITH backlog AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM ai_task_registry
        WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEFERRED')
        LIMIT %(count_limit)s) AS capped
), decision AS (
    SELECT n, CASE WHEN n < %(ceiling)s THEN 'PENDING'
                   WHEN %(park)s AND n < %(park_ceiling)s THEN 'DEFERRED'
              END AS status
    FROM backlog
), inserted AS (
    INSERT INTO ai_task_registry (task_key, status, source, trace_id, feature_global_id,
        attachment_global_id, event_type, payload, next_attempt_at, created_at, updated_at)
    SELECT %(key)s, decision.status, %(source)s, %(trace_id)s, %(feature_global_id)s,
        %(attachment_global_id)s, %(event_type)s, %(payload)s::jsonb, %(due_at)s, %(now)s,
        %(now)s
    FROM decision WHERE decision.status IS NOT NULL
    ON CONFLICT (task_key) DO NOTHING
    RETURNING status
)
SELECT (SELECT status FROM inserted) AS inserted,
       (SELECT n FROM decision) AS backlog,
       existing.status AS status,
       existing.outcome AS outcome
FROM (SELECT 1) AS one
LEFT JOIN ai_task_registry AS existing ON existing.task_key = %(key)s

-- claim --
-- Lease due tasks with fresh fencing tokens; rows another engine holds locked are skipped
WITH picked AS (
    SELECT task_key FROM ai_task_registry
    WHERE status IN ('PENDING', 'FAILED', 'DEFERRED') AND next_attempt_at <= %(now)s
    ORDER BY next_attempt_at, created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE ai_task_registry AS t
SET status = 'PROCESSING', lease_token = t.lease_token + 1, lease_owner = %(owner)s,
    lease_expires_at = %(expires_at)s, updated_at = %(now)s
FROM picked
WHERE t.task_key = picked.task_key
RETURNING t.*

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
-- Delete every row of every table but schema_version (tests and drills)
TRUNCATE ai_task_registry, circuit_state, circuit_probe, degradation_state, ai_call_log,
    format_anomaly, resilience_config
