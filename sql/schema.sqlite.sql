-- File format: named blocks, as in procrastinate's queries.sql.
    -- name --
    -- description
    -- SQL (statements end with a semicolon at the end of a line)
-- Blocks named migration_NNNN are applied in order, each in one transaction, and recorded in
-- schema_version; a database at version N gets only the blocks above N.

-- migration_0001 --
-- The ledger, the breaker state, the call log, format anomalies and run-time configuration.
CREATE TABLE IF NOT EXISTS ai_task_registry (
    task_key             TEXT PRIMARY KEY,
    status               TEXT NOT NULL CHECK (status IN
                             ('PENDING', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'DEFERRED', 'DEAD')),
    source               TEXT NOT NULL DEFAULT 'survey123',
    trace_id             TEXT NOT NULL DEFAULT '',
    feature_global_id    TEXT,
    attachment_global_id TEXT,
    event_type           TEXT,
    payload              TEXT NOT NULL,
    attempt_count        INTEGER NOT NULL DEFAULT 0,
    outcome              TEXT CHECK (outcome IN ('ACCEPTED', 'REVIEW', 'SKIPPED')),
    failure_class        TEXT,
    error_class          TEXT,
    last_error           TEXT,
    next_attempt_at      REAL,
    lease_owner          TEXT,
    lease_expires_at     REAL,
    lease_token          INTEGER NOT NULL DEFAULT 0,
    downloaded           TEXT,
    analyzed             TEXT,
    written              TEXT,
    result               TEXT,
    created_at           REAL NOT NULL,
    updated_at           REAL NOT NULL,
    completed_at         REAL
);
-- The in-progress rows only, so neither claims nor the backlog check ever read history:
-- claims walk it in due order (a PROCESSING row's next_attempt_at is its lease expiry, so
-- live leases sort after the due work), the backlog check counts it with a LIMIT.
CREATE INDEX IF NOT EXISTS ai_task_registry_live_idx
    ON ai_task_registry (next_attempt_at, created_at)
    WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEFERRED');
CREATE INDEX IF NOT EXISTS ai_task_registry_lease_idx
    ON ai_task_registry (lease_expires_at)
    WHERE status = 'PROCESSING';
CREATE INDEX IF NOT EXISTS ai_task_registry_completed_idx
    ON ai_task_registry (completed_at)
    WHERE completed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS ai_task_registry_dead_idx
    ON ai_task_registry (failure_class)
    WHERE status = 'DEAD';

-- One row per protected service: the shared breaker. Every change is a compare-and-set on
-- generation; a missing row is created CLOSED and an existing one is never overwritten.
CREATE TABLE IF NOT EXISTS circuit_state (
    service              TEXT PRIMARY KEY,
    state                TEXT NOT NULL DEFAULT 'CLOSED'
                             CHECK (state IN ('CLOSED', 'OPEN', 'HALF_OPEN')),
    mode                 TEXT NOT NULL DEFAULT 'AUTO'
                             CHECK (mode IN ('AUTO', 'FORCED_OPEN', 'FORCED_CLOSED', 'DISABLED')),
    generation           INTEGER NOT NULL DEFAULT 0,
    changed_at           REAL NOT NULL,
    open_until           REAL,
    trips                INTEGER NOT NULL DEFAULT 0,
    updated_at           REAL NOT NULL
);

-- The probe slots of the current half-open round: exactly half_open_probes rows, created by the
-- transition to HALF_OPEN and removed by the next transition. token grows with each claim, so
-- the report of a probe whose slot timed out and was claimed again changes nothing.
CREATE TABLE IF NOT EXISTS circuit_probe (
    service              TEXT NOT NULL,
    slot                 INTEGER NOT NULL,
    generation           INTEGER NOT NULL,
    token                INTEGER NOT NULL DEFAULT 0,
    claimed_at           REAL,
    ok                   INTEGER,
    reported_at          REAL,
    PRIMARY KEY (service, slot)
);

-- The fleet's degradation ladder (one row, scope 'fleet'); compare-and-set on generation.
CREATE TABLE IF NOT EXISTS degradation_state (
    scope                TEXT PRIMARY KEY,
    level                INTEGER NOT NULL DEFAULT 0 CHECK (level BETWEEN 0 AND 4),
    override_level       INTEGER CHECK (override_level BETWEEN 0 AND 4),
    generation           INTEGER NOT NULL DEFAULT 0,
    changed_at           REAL NOT NULL,
    calm_since           REAL,
    updated_at           REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS ai_call_log (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    service              TEXT NOT NULL,
    started_at           REAL NOT NULL,
    duration_s           REAL NOT NULL,
    error_class          TEXT,
    status_code          INTEGER,
    retry                INTEGER NOT NULL DEFAULT 0,
    trace_id             TEXT NOT NULL DEFAULT '',
    task_key             TEXT,
    connect_s            REAL,
    ttfb_s               REAL,
    body_s               REAL,
    phases               TEXT
);
CREATE INDEX IF NOT EXISTS ai_call_log_service_started_idx ON ai_call_log (service, started_at);

CREATE TABLE IF NOT EXISTS format_anomaly (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    provider             TEXT NOT NULL,
    observed_at          REAL NOT NULL,
    errors               TEXT NOT NULL,
    excerpt              TEXT NOT NULL,
    model_version        TEXT,
    task_key             TEXT,
    trace_id             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS format_anomaly_observed_idx ON format_anomaly (observed_at);

CREATE TABLE IF NOT EXISTS resilience_config (
    name                 TEXT PRIMARY KEY,
    value                TEXT NOT NULL,
    updated_at           REAL NOT NULL
);

-- migration_0002 --
-- The pipeline: requeue budgets and intake times on the ledger, the analysis cache (one
-- validated AI result per photo content and model configuration), notifications for FME's
-- Emailer, and the asset-condition table a sink writes in the completion's own transaction.
ALTER TABLE ai_task_registry ADD COLUMN requeue_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ai_task_registry ADD COLUMN received_at REAL;
CREATE INDEX IF NOT EXISTS ai_task_registry_created_idx ON ai_task_registry (created_at);
CREATE TABLE IF NOT EXISTS analysis_cache (
    fingerprint          TEXT PRIMARY KEY,
    result               TEXT NOT NULL,
    created_at           REAL NOT NULL,
    reused               INTEGER NOT NULL DEFAULT 0,
    last_used_at         REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS notification (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                 TEXT NOT NULL,
    task_key             TEXT,
    subject              TEXT NOT NULL,
    body                 TEXT NOT NULL,
    created_at           REAL NOT NULL,
    sent_at              REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS notification_once_idx ON notification (kind, task_key);
CREATE INDEX IF NOT EXISTS notification_pending_idx ON notification (created_at)
    WHERE sent_at IS NULL;
CREATE TABLE IF NOT EXISTS asset_condition (
    task_key             TEXT PRIMARY KEY,
    feature_global_id    TEXT NOT NULL,
    attachment_global_id TEXT,
    asset_type           TEXT,
    condition            TEXT,
    confidence           REAL,
    outcome              TEXT NOT NULL,
    model_version        TEXT,
    trace_id             TEXT NOT NULL DEFAULT '',
    assessed_at          REAL NOT NULL
);

-- migration_0003 --
-- Intake's bounded records: dead letters of invalid bodies are counted per minute and in all
-- through their own partial index; a delivery refused 429/503 leaves what reconciliation needs
-- (one row per refused body, its redeliveries counted on it); what intake could not keep is
-- counted by name.
CREATE INDEX IF NOT EXISTS ai_task_registry_invalid_idx
    ON ai_task_registry (created_at)
    WHERE status = 'DEAD' AND failure_class = 'INVALID_PAYLOAD';
CREATE TABLE IF NOT EXISTS intake_refusal (
    refusal_key          TEXT PRIMARY KEY,
    reason               TEXT NOT NULL,
    status_code          INTEGER NOT NULL,
    feature_global_id    TEXT NOT NULL,
    service_url          TEXT,
    layer_url            TEXT,
    delivery_id          TEXT,
    event_type           TEXT,
    records              TEXT NOT NULL,
    photos_refused       INTEGER NOT NULL,
    photos_stored        INTEGER NOT NULL,
    refusals             INTEGER NOT NULL DEFAULT 1,
    first_refused_at     REAL NOT NULL,
    last_refused_at      REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS intake_refusal_last_idx ON intake_refusal (last_refused_at);
CREATE TABLE IF NOT EXISTS intake_counter (
    name                 TEXT PRIMARY KEY,
    n                    INTEGER NOT NULL DEFAULT 0,
    first_at             REAL NOT NULL,
    last_at              REAL NOT NULL
);
-- intake.park_ceiling_factor is retired (the park ceiling is a number of rows now): a row still
-- naming it would keep every other row of resilience_config out of force.
DELETE FROM resilience_config
WHERE lower(name) IN ('intake.park_ceiling_factor', 'intake_park_ceiling_factor');

-- migration_0004 --
-- One analysis at a time per photo content and model: a task about to call the Vision AI claims
-- the photo's fingerprint until its lease ends; another task with the same photo waits for the
-- answer instead of paying for it a second time. A claim past its time is anyone's.
CREATE TABLE IF NOT EXISTS analysis_claim (
    fingerprint          TEXT PRIMARY KEY,
    task_key             TEXT NOT NULL,
    until                REAL NOT NULL
);

-- migration_0005 --
-- Calls spaced fleet-wide: after a 429 every engine takes the next slot of the service's pace
-- (one interval apart) before calling it, so the fleet keeps to the rate the service allows
-- instead of being refused over and over; the interval relaxes with each success until the
-- pace is off again.
CREATE TABLE IF NOT EXISTS call_pace (
    service              TEXT PRIMARY KEY,
    interval_s           REAL NOT NULL,
    next_at              REAL NOT NULL
);

-- migration_0006 --
-- Done means analysed. A photo the degradation ladder holds back stays owed: DEFERRED with
-- defer_cause 'degraded' (the ladder's own backlog leaves it out, so holding it back never keeps
-- the ladder up), layer_flag remembers the interim value written on the layer (AWAITING_ANALYSIS,
-- written once), and priority (1 for a critical asset type, set at registration) puts critical
-- photos first in the claim order. A photo skipped by the deployment's policy, or analysed under
-- the confidence threshold, waits in the review queue (review_state OPEN) until a person's
-- verdict (review_verdict) is recorded and written back (review_written_at).
ALTER TABLE ai_task_registry ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ai_task_registry ADD COLUMN defer_cause TEXT;
ALTER TABLE ai_task_registry ADD COLUMN layer_flag TEXT;
ALTER TABLE ai_task_registry ADD COLUMN review_state TEXT
    CHECK (review_state IN ('OPEN', 'RESOLVED'));
ALTER TABLE ai_task_registry ADD COLUMN review_verdict TEXT;
ALTER TABLE ai_task_registry ADD COLUMN review_written_at REAL;
-- A photo an earlier version marked SKIPPED at a degradation level was never analysed and
-- never skipped by the deployment's policy: it is owed again, due at once (the expansion
-- of a feature without a photo list, which names the tasks it made, stays finished).
UPDATE ai_task_registry
SET status = 'PENDING', outcome = NULL, result = NULL, written = NULL, completed_at = NULL,
    lease_expires_at = NULL, next_attempt_at = updated_at
WHERE status = 'SUCCEEDED' AND outcome = 'SKIPPED' AND json_extract(result, '$.expanded') IS NULL;
CREATE INDEX IF NOT EXISTS ai_task_registry_claim_idx
    ON ai_task_registry (priority DESC, next_attempt_at, created_at)
    WHERE status IN ('PENDING', 'FAILED', 'DEFERRED');
CREATE INDEX IF NOT EXISTS ai_task_registry_review_idx
    ON ai_task_registry (completed_at)
    WHERE review_state = 'OPEN';
-- migration_0007 --
-- The analysis claim is fenced by the lease: it names the lease (task and fencing token) whose
-- call is in flight, so a new holder of the same task, after the lease lapsed, waits for that
-- answer or for the claim to run out instead of paying for a second call.
ALTER TABLE analysis_claim ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;

-- migration_0008 --
-- Slow is not down. call_limit holds each service's adaptive concurrency limit, shared by every
-- engine: the limit on calls in flight, the time-to-first-byte limit in force and the latency
-- averages they follow. call_slot holds one row per call in flight under it (a call the engine
-- gave up on stays until the service could no longer be working on it; an engine that died
-- leaves a row that runs out). ai_call_log.down says a failure said the service is down (a run
-- of them opens the circuit whatever the window's successes), read newest first by id.
CREATE TABLE IF NOT EXISTS call_limit (
    service              TEXT PRIMARY KEY,
    limit_value          REAL NOT NULL,
    ttfb_s               REAL,
    rtt_long_s           REAL,
    rtt_peak_s           REAL,
    updated_at           REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS call_slot (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    service              TEXT NOT NULL,
    holder               TEXT NOT NULL,
    started_at           REAL NOT NULL,
    until                REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS call_slot_service_idx ON call_slot (service, until);
ALTER TABLE ai_call_log ADD COLUMN down INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS ai_call_log_service_id_idx ON ai_call_log (service, id);
-- breaker.slow_call_rate is retired (slow calls no longer open the circuit); `breaker calibrate
-- --apply` may have stored it, and a row naming it would keep every other row out of force.
DELETE FROM resilience_config
WHERE lower(name) IN ('breaker.slow_call_rate', 'breaker_slow_call_rate');

-- migration_0009 --
-- Monotonic metrics for /metrics, kept by the ledger in the same transaction as their event
-- (triggers: no round trip), so a pruned call log or a requeued dead letter never makes a count
-- go down. metric_counter counts events by name and labels (a JSON object); metric_histogram
-- holds each histogram's observations per bucket (le: the bucket's upper bound, 9e999 for
-- +Inf; total: the sum of the values it holds); metric_bucket lists the bounds. An existing
-- ledger starts from what it holds: its finished tasks, registrations and the calls and
-- anomalies not pruned yet.
CREATE TABLE IF NOT EXISTS metric_counter (
    name                 TEXT NOT NULL,
    labels               TEXT NOT NULL,
    n                    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels)
);
CREATE TABLE IF NOT EXISTS metric_histogram (
    name                 TEXT NOT NULL,
    labels               TEXT NOT NULL,
    le                   REAL NOT NULL,
    n                    INTEGER NOT NULL DEFAULT 0,
    total                REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels, le)
);
CREATE TABLE IF NOT EXISTS metric_bucket (
    le                   REAL PRIMARY KEY
);
INSERT INTO metric_bucket (le) VALUES (0.05), (0.1), (0.25), (0.5), (1), (2.5), (5), (10),
    (30), (60), (120), (300), (600), (1800), (3600), (9e999);
CREATE TRIGGER metric_call AFTER INSERT ON ai_call_log
BEGIN
    INSERT INTO metric_counter (name, labels, n)
    VALUES ('ai_calls', json_object('service', NEW.service,
                                    'outcome', coalesce(NEW.error_class, 'ok')), 1)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_histogram (name, labels, le, n, total)
    SELECT 'ai_call_duration_seconds', json_object('service', NEW.service, 'phase', p.phase),
           (SELECT min(le) FROM metric_bucket WHERE le >= p.v), 1, p.v
    FROM (SELECT 'total' AS phase, max(NEW.duration_s, 0.0) AS v
          UNION ALL SELECT 'connect', max(NEW.connect_s, 0.0) WHERE NEW.connect_s IS NOT NULL
          UNION ALL SELECT 'ttfb', max(NEW.ttfb_s, 0.0) WHERE NEW.ttfb_s IS NOT NULL
          UNION ALL SELECT 'body', max(NEW.body_s, 0.0) WHERE NEW.body_s IS NOT NULL) AS p
    WHERE true
    ON CONFLICT (name, labels, le) DO UPDATE SET n = n + 1, total = total + excluded.total;
END;
CREATE TRIGGER metric_anomaly AFTER INSERT ON format_anomaly
BEGIN
    INSERT INTO metric_counter (name, labels, n) VALUES ('format_anomalies', json_object(), 1)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER metric_registered AFTER INSERT ON ai_task_registry
WHEN NEW.received_at IS NOT NULL
BEGIN
    INSERT INTO metric_histogram (name, labels, le, n, total)
    SELECT 'intake_latency_seconds', json_object(), min(le),
           1, max(NEW.created_at - NEW.received_at, 0.0)
    FROM metric_bucket WHERE le >= max(NEW.created_at - NEW.received_at, 0.0)
    ON CONFLICT (name, labels, le) DO UPDATE SET n = n + 1, total = total + excluded.total;
END;
-- A task finished (SUCCEEDED or DEAD), when it becomes so: a dead letter requeued and dead
-- again counts twice (the counts are of events); the evidence of an invalid body is inserted DEAD.
CREATE TRIGGER metric_finished_insert AFTER INSERT ON ai_task_registry
WHEN NEW.status IN ('SUCCEEDED', 'DEAD')
BEGIN
    INSERT INTO metric_counter (name, labels, n)
    VALUES ('tasks_completed', json_object('status', NEW.status, 'kind',
            CASE WHEN NEW.status = 'DEAD' THEN 'dead_letter'
                 WHEN NEW.outcome = 'SKIPPED' AND NEW.review_state IS NULL THEN 'expanded'
                 WHEN NEW.outcome = 'SKIPPED' THEN 'skipped_by_policy'
                 ELSE 'analysed' END), 1)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_counter (name, labels, n)
    SELECT 'dead_letters', json_object('cause', coalesce(NEW.failure_class, 'UNKNOWN')), 1
    WHERE NEW.status = 'DEAD'
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_counter (name, labels, n)
    SELECT 'reused_analyses', json_object(), 1
    WHERE NEW.status = 'SUCCEEDED' AND coalesce(NEW.outcome, '') <> 'SKIPPED'
      AND coalesce(json_extract(NEW.result, '$.reused'), 0)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_histogram (name, labels, le, n, total)
    SELECT 'end_to_end_seconds', json_object(), le, 1,
           max(NEW.completed_at - NEW.created_at, 0.0)
    FROM metric_bucket
    WHERE NEW.status = 'SUCCEEDED' AND coalesce(NEW.outcome, '') <> 'SKIPPED'
      AND le >= max(NEW.completed_at - NEW.created_at, 0.0)
    ORDER BY le LIMIT 1
    ON CONFLICT (name, labels, le) DO UPDATE SET n = n + 1, total = total + excluded.total;
END;
CREATE TRIGGER metric_finished_update AFTER UPDATE OF status ON ai_task_registry
WHEN NEW.status IN ('SUCCEEDED', 'DEAD') AND OLD.status <> NEW.status
BEGIN
    INSERT INTO metric_counter (name, labels, n)
    VALUES ('tasks_completed', json_object('status', NEW.status, 'kind',
            CASE WHEN NEW.status = 'DEAD' THEN 'dead_letter'
                 WHEN NEW.outcome = 'SKIPPED' AND NEW.review_state IS NULL THEN 'expanded'
                 WHEN NEW.outcome = 'SKIPPED' THEN 'skipped_by_policy'
                 ELSE 'analysed' END), 1)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_counter (name, labels, n)
    SELECT 'dead_letters', json_object('cause', coalesce(NEW.failure_class, 'UNKNOWN')), 1
    WHERE NEW.status = 'DEAD'
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_counter (name, labels, n)
    SELECT 'reused_analyses', json_object(), 1
    WHERE NEW.status = 'SUCCEEDED' AND coalesce(NEW.outcome, '') <> 'SKIPPED'
      AND coalesce(json_extract(NEW.result, '$.reused'), 0)
    ON CONFLICT (name, labels) DO UPDATE SET n = n + 1;
    INSERT INTO metric_histogram (name, labels, le, n, total)
    SELECT 'end_to_end_seconds', json_object(), le, 1,
           max(NEW.completed_at - NEW.created_at, 0.0)
    FROM metric_bucket
    WHERE NEW.status = 'SUCCEEDED' AND coalesce(NEW.outcome, '') <> 'SKIPPED'
      AND le >= max(NEW.completed_at - NEW.created_at, 0.0)
    ORDER BY le LIMIT 1
    ON CONFLICT (name, labels, le) DO UPDATE SET n = n + 1, total = total + excluded.total;
END;
INSERT INTO metric_counter (name, labels, n)
SELECT 'tasks_completed', json_object('status', status, 'kind',
            CASE WHEN status = 'DEAD' THEN 'dead_letter'
                 WHEN outcome = 'SKIPPED' AND review_state IS NULL THEN 'expanded'
                 WHEN outcome = 'SKIPPED' THEN 'skipped_by_policy'
                 ELSE 'analysed' END), count(*)
FROM ai_task_registry WHERE status IN ('SUCCEEDED', 'DEAD') GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'dead_letters', json_object('cause', coalesce(failure_class, 'UNKNOWN')), count(*)
FROM ai_task_registry WHERE status = 'DEAD' GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'reused_analyses', json_object(), count(*) FROM ai_task_registry
WHERE status = 'SUCCEEDED' AND coalesce(outcome, '') <> 'SKIPPED'
  AND coalesce(json_extract(result, '$.reused'), 0)
HAVING count(*) > 0;
INSERT INTO metric_counter (name, labels, n)
SELECT 'ai_calls', json_object('service', service, 'outcome', coalesce(error_class, 'ok')),
       count(*)
FROM ai_call_log GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'format_anomalies', json_object(), count(*) FROM format_anomaly HAVING count(*) > 0;
INSERT INTO metric_histogram (name, labels, le, n, total)
SELECT name, labels, (SELECT min(b.le) FROM metric_bucket AS b WHERE b.le >= v) AS bound,
       count(*), sum(v)
FROM (SELECT 'intake_latency_seconds' AS name, json_object() AS labels,
             max(created_at - received_at, 0.0) AS v
      FROM ai_task_registry WHERE received_at IS NOT NULL
      UNION ALL
      SELECT 'end_to_end_seconds', json_object(), max(completed_at - created_at, 0.0)
      FROM ai_task_registry
      WHERE status = 'SUCCEEDED' AND coalesce(outcome, '') <> 'SKIPPED'
        AND completed_at IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds', json_object('service', service, 'phase', 'total'),
             max(duration_s, 0.0) FROM ai_call_log
      UNION ALL
      SELECT 'ai_call_duration_seconds', json_object('service', service, 'phase', 'connect'),
             max(connect_s, 0.0) FROM ai_call_log WHERE connect_s IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds', json_object('service', service, 'phase', 'ttfb'),
             max(ttfb_s, 0.0) FROM ai_call_log WHERE ttfb_s IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds', json_object('service', service, 'phase', 'body'),
             max(body_s, 0.0) FROM ai_call_log WHERE body_s IS NOT NULL) AS observed
GROUP BY name, labels, bound;

-- schema_version --
-- Created before any migration; one row per applied migration.
CREATE TABLE IF NOT EXISTS schema_version (
    version              INTEGER PRIMARY KEY,
    applied_at           REAL
);
