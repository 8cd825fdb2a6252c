-- File format: named blocks, as in procrastinate's queries.sql.
    -- name --
    -- description
    -- SQL (one or more statements)
-- Blocks named migration_NNNN are applied in order, each in one transaction, and recorded in
-- schema_version; a database at version N gets only the blocks above N.

-- migration_0001 --
-- The ledger, the breaker state, the call log, format anomalies and run-time configuration.
CREATE TABLE IF NOT EXISTS ai_task_registry (
    task_key             text PRIMARY KEY,
    status               text NOT NULL CHECK (status IN
                             ('PENDING', 'PROCESSING', 'SUCCEEDED', 'FAILED', 'DEFERRED', 'DEAD')),
    source               text NOT NULL DEFAULT 'survey123',
    trace_id             text NOT NULL DEFAULT '',
    feature_global_id    text,
    attachment_global_id text,
    event_type           text,
    payload              jsonb NOT NULL,
    attempt_count        integer NOT NULL DEFAULT 0,
    outcome              text CHECK (outcome IN ('ACCEPTED', 'REVIEW', 'SKIPPED')),
    failure_class        text,
    error_class          text,
    last_error           text,
    next_attempt_at      double precision,
    lease_owner          text,
    lease_expires_at     double precision,
    lease_token          bigint NOT NULL DEFAULT 0,
    downloaded           jsonb,
    analyzed             jsonb,
    written              jsonb,
    result               jsonb,
    created_at           double precision NOT NULL,
    updated_at           double precision NOT NULL,
    completed_at         double precision
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
    service              text PRIMARY KEY,
    state                text NOT NULL DEFAULT 'CLOSED'
                             CHECK (state IN ('CLOSED', 'OPEN', 'HALF_OPEN')),
    mode                 text NOT NULL DEFAULT 'AUTO'
                             CHECK (mode IN ('AUTO', 'FORCED_OPEN', 'FORCED_CLOSED', 'DISABLED')),
    generation           bigint NOT NULL DEFAULT 0,
    changed_at           double precision NOT NULL,
    open_until           double precision,
    trips                integer NOT NULL DEFAULT 0,
    updated_at           double precision NOT NULL
);

-- The probe slots of the current half-open round: exactly half_open_probes rows, created by the
-- transition to HALF_OPEN and removed by the next transition. token grows with each claim, so
-- the report of a probe whose slot timed out and was claimed again changes nothing.
CREATE TABLE IF NOT EXISTS circuit_probe (
    service              text NOT NULL,
    slot                 integer NOT NULL,
    generation           bigint NOT NULL,
    token                bigint NOT NULL DEFAULT 0,
    claimed_at           double precision,
    ok                   boolean,
    reported_at          double precision,
    PRIMARY KEY (service, slot)
);

-- The fleet's degradation ladder (one row, scope 'fleet'); compare-and-set on generation.
CREATE TABLE IF NOT EXISTS degradation_state (
    scope                text PRIMARY KEY,
    level                integer NOT NULL DEFAULT 0 CHECK (level BETWEEN 0 AND 4),
    override_level       integer CHECK (override_level BETWEEN 0 AND 4),
    generation           bigint NOT NULL DEFAULT 0,
    changed_at           double precision NOT NULL,
    calm_since           double precision,
    updated_at           double precision NOT NULL
);

CREATE TABLE IF NOT EXISTS ai_call_log (
    id                   bigserial PRIMARY KEY,
    service              text NOT NULL,
    started_at           double precision NOT NULL,
    duration_s           double precision NOT NULL,
    error_class          text,
    status_code          integer,
    retry                boolean NOT NULL DEFAULT false,
    trace_id             text NOT NULL DEFAULT '',
    task_key             text,
    connect_s            double precision,
    ttfb_s               double precision,
    body_s               double precision,
    phases               jsonb
);
CREATE INDEX IF NOT EXISTS ai_call_log_service_started_idx ON ai_call_log (service, started_at);

CREATE TABLE IF NOT EXISTS format_anomaly (
    id                   bigserial PRIMARY KEY,
    provider             text NOT NULL,
    observed_at          double precision NOT NULL,
    errors               jsonb NOT NULL,
    excerpt              text NOT NULL,
    model_version        text,
    task_key             text,
    trace_id             text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS format_anomaly_observed_idx ON format_anomaly (observed_at);

CREATE TABLE IF NOT EXISTS resilience_config (
    name                 text PRIMARY KEY,
    value                text NOT NULL,
    updated_at           double precision NOT NULL
);

-- migration_0002 --
-- The pipeline: requeue budgets and intake times on the ledger, the analysis cache (one
-- validated AI result per photo content and model configuration), notifications for FME's
-- Emailer, and the asset-condition table a sink writes in the completion's own transaction.
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS requeue_count integer NOT NULL DEFAULT 0;
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS received_at double precision;
CREATE INDEX IF NOT EXISTS ai_task_registry_created_idx ON ai_task_registry (created_at);
CREATE TABLE IF NOT EXISTS analysis_cache (
    fingerprint          text PRIMARY KEY,
    result               jsonb NOT NULL,
    created_at           double precision NOT NULL,
    reused               integer NOT NULL DEFAULT 0,
    last_used_at         double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS notification (
    id                   bigserial PRIMARY KEY,
    kind                 text NOT NULL,
    task_key             text,
    subject              text NOT NULL,
    body                 text NOT NULL,
    created_at           double precision NOT NULL,
    sent_at              double precision
);
CREATE UNIQUE INDEX IF NOT EXISTS notification_once_idx ON notification (kind, task_key);
CREATE INDEX IF NOT EXISTS notification_pending_idx ON notification (created_at)
    WHERE sent_at IS NULL;
CREATE TABLE IF NOT EXISTS asset_condition (
    task_key             text PRIMARY KEY,
    feature_global_id    text NOT NULL,
    attachment_global_id text,
    asset_type           text,
    condition            text,
    confidence           double precision,
    outcome              text NOT NULL,
    model_version        text,
    trace_id             text NOT NULL DEFAULT '',
    assessed_at          double precision NOT NULL
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
    refusal_key          text PRIMARY KEY,
    reason               text NOT NULL,
    status_code          integer NOT NULL,
    feature_global_id    text NOT NULL,
    service_url          text,
    layer_url            text,
    delivery_id          text,
    event_type           text,
    records              text NOT NULL,
    photos_refused       integer NOT NULL,
    photos_stored        integer NOT NULL,
    refusals             integer NOT NULL DEFAULT 1,
    first_refused_at     double precision NOT NULL,
    last_refused_at      double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS intake_refusal_last_idx ON intake_refusal (last_refused_at);
CREATE TABLE IF NOT EXISTS intake_counter (
    name                 text PRIMARY KEY,
    n                    bigint NOT NULL DEFAULT 0,
    first_at             double precision NOT NULL,
    last_at              double precision NOT NULL
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
    fingerprint          text PRIMARY KEY,
    task_key             text NOT NULL,
    until                double precision NOT NULL
);

-- migration_0005 --
-- Calls spaced fleet-wide: after a 429 every engine takes the next slot of the service's pace
-- (one interval apart) before calling it, so the fleet keeps to the rate the service allows
-- instead of being refused over and over; the interval relaxes with each success until the
-- pace is off again.
CREATE TABLE IF NOT EXISTS call_pace (
    service              text PRIMARY KEY,
    interval_s           double precision NOT NULL,
    next_at              double precision NOT NULL
);

-- migration_0006 --
-- Done means analysed. A photo the degradation ladder holds back stays owed: DEFERRED with
-- defer_cause 'degraded' (the ladder's own backlog leaves it out, so holding it back never keeps
-- the ladder up), layer_flag remembers the interim value written on the layer (AWAITING_ANALYSIS,
-- written once), and priority (1 for a critical asset type, set at registration) puts critical
-- photos first in the claim order. A photo skipped by the deployment's policy, or analysed under
-- the confidence threshold, waits in the review queue (review_state OPEN) until a person's
-- verdict (review_verdict) is recorded and written back (review_written_at).
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0;
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS defer_cause text;
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS layer_flag text;
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS review_state text
    CHECK (review_state IN ('OPEN', 'RESOLVED'));
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS review_verdict jsonb;
ALTER TABLE ai_task_registry ADD COLUMN IF NOT EXISTS review_written_at double precision;
-- A photo an earlier version marked SKIPPED at a degradation level was never analysed and
-- never skipped by the deployment's policy: it is owed again, due at once (the expansion
-- of a feature without a photo list, which names the tasks it made, stays finished).
UPDATE ai_task_registry
SET status = 'PENDING', outcome = NULL, result = NULL, written = NULL, completed_at = NULL,
    lease_expires_at = NULL, next_attempt_at = updated_at
WHERE status = 'SUCCEEDED' AND outcome = 'SKIPPED' AND result -> 'expanded' IS NULL;
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
ALTER TABLE analysis_claim ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;

-- migration_0008 --
-- Slow is not down. call_limit holds each service's adaptive concurrency limit, shared by every
-- engine: the limit on calls in flight, the time-to-first-byte limit in force and the latency
-- averages they follow. call_slot holds one row per call in flight under it (a call the engine
-- gave up on stays until the service could no longer be working on it; an engine that died
-- leaves a row that runs out). ai_call_log.down says a failure said the service is down (a run
-- of them opens the circuit whatever the window's successes), read newest first by id.
CREATE TABLE IF NOT EXISTS call_limit (
    service              text PRIMARY KEY,
    limit_value          double precision NOT NULL,
    ttfb_s               double precision,
    rtt_long_s           double precision,
    rtt_peak_s           double precision,
    updated_at           double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS call_slot (
    id                   bigserial PRIMARY KEY,
    service              text NOT NULL,
    holder               text NOT NULL,
    started_at           double precision NOT NULL,
    until                double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS call_slot_service_idx ON call_slot (service, until);
ALTER TABLE ai_call_log ADD COLUMN IF NOT EXISTS down boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS ai_call_log_service_id_idx ON ai_call_log (service, id);
-- breaker.slow_call_rate is retired (slow calls no longer open the circuit); `breaker calibrate
-- --apply` may have stored it, and a row naming it would keep every other row out of force.
DELETE FROM resilience_config
WHERE lower(name) IN ('breaker.slow_call_rate', 'breaker_slow_call_rate');

-- migration_0009 --
-- Monotonic metrics for /metrics, kept by the ledger in the same transaction as their event
-- (triggers: no round trip), so a pruned call log or a requeued dead letter never makes a count
-- go down. metric_counter counts events by name and labels (a JSON object); metric_histogram
-- holds each histogram's observations per bucket (le: the bucket's upper bound, 'Infinity' for
-- +Inf; total: the sum of the values it holds); metric_bucket lists the bounds. An existing
-- ledger starts from what it holds: its finished tasks, registrations and the calls and
-- anomalies not pruned yet. Each count is kept in 16 shards, the session's by its backend's pid
-- (read as their sum): engines counting the same event do not queue on one row lock held to
-- their commit, and a transaction that counts waits on no other engine's count.
CREATE TABLE IF NOT EXISTS metric_counter (
    name                 text NOT NULL,
    labels               text NOT NULL,
    shard                smallint NOT NULL DEFAULT 0,
    n                    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels, shard)
);
CREATE TABLE IF NOT EXISTS metric_histogram (
    name                 text NOT NULL,
    labels               text NOT NULL,
    le                   double precision NOT NULL,
    shard                smallint NOT NULL DEFAULT 0,
    n                    bigint NOT NULL DEFAULT 0,
    total                double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels, le, shard)
);
CREATE TABLE IF NOT EXISTS metric_bucket (
    le                   double precision PRIMARY KEY
);
INSERT INTO metric_bucket (le) VALUES (0.05), (0.1), (0.25), (0.5), (1), (2.5), (5), (10),
    (30), (60), (120), (300), (600), (1800), (3600), ('Infinity');
CREATE OR REPLACE FUNCTION metric_count(m_name text, m_labels text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO metric_counter (name, labels, shard, n)
    VALUES (m_name, m_labels, pg_backend_pid() % 16, 1)
    ON CONFLICT (name, labels, shard) DO UPDATE SET n = metric_counter.n + 1
$$;
CREATE OR REPLACE FUNCTION metric_observe(m_name text, m_labels text, m_value double precision)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO metric_histogram (name, labels, le, shard, n, total)
    SELECT m_name, m_labels, min(b.le), pg_backend_pid() % 16, 1, greatest(m_value, 0.0)
    FROM metric_bucket AS b WHERE b.le >= greatest(m_value, 0.0)
    ON CONFLICT (name, labels, le, shard) DO UPDATE
    SET n = metric_histogram.n + 1, total = metric_histogram.total + excluded.total
$$;
CREATE OR REPLACE FUNCTION metric_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM metric_count('ai_calls', json_build_object(
        'service', NEW.service, 'outcome', coalesce(NEW.error_class, 'ok'))::text);
    PERFORM metric_observe('ai_call_duration_seconds', json_build_object(
        'service', NEW.service, 'phase', 'total')::text, NEW.duration_s);
    IF NEW.connect_s IS NOT NULL THEN
        PERFORM metric_observe('ai_call_duration_seconds', json_build_object(
            'service', NEW.service, 'phase', 'connect')::text, NEW.connect_s);
    END IF;
    IF NEW.ttfb_s IS NOT NULL THEN
        PERFORM metric_observe('ai_call_duration_seconds', json_build_object(
            'service', NEW.service, 'phase', 'ttfb')::text, NEW.ttfb_s);
    END IF;
    IF NEW.body_s IS NOT NULL THEN
        PERFORM metric_observe('ai_call_duration_seconds', json_build_object(
            'service', NEW.service, 'phase', 'body')::text, NEW.body_s);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER metric_call AFTER INSERT ON ai_call_log
FOR EACH ROW EXECUTE FUNCTION metric_call();
CREATE OR REPLACE FUNCTION metric_anomaly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM metric_count('format_anomalies', json_build_object()::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER metric_anomaly AFTER INSERT ON format_anomaly
FOR EACH ROW EXECUTE FUNCTION metric_anomaly();
-- A task finished (SUCCEEDED or DEAD), when it becomes so: a dead letter requeued and dead
-- again counts twice (the counts are of events); the evidence of an invalid body is inserted
-- DEAD. A registration that carries its webhook's arrival is an intake latency.
CREATE OR REPLACE FUNCTION metric_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.received_at IS NOT NULL THEN
        PERFORM metric_observe('intake_latency_seconds', json_build_object()::text,
                               NEW.created_at - NEW.received_at);
    END IF;
    IF NEW.status NOT IN ('SUCCEEDED', 'DEAD') THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.status = NEW.status THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM metric_count('tasks_completed', json_build_object('status', NEW.status, 'kind',
            CASE WHEN NEW.status = 'DEAD' THEN 'dead_letter'
                 WHEN NEW.outcome = 'SKIPPED' AND NEW.review_state IS NULL THEN 'expanded'
                 WHEN NEW.outcome = 'SKIPPED' THEN 'skipped_by_policy'
                 ELSE 'analysed' END)::text);
    IF NEW.status = 'DEAD' THEN
        PERFORM metric_count('dead_letters', json_build_object(
            'cause', coalesce(NEW.failure_class, 'UNKNOWN'))::text);
    ELSIF coalesce(NEW.outcome, '') <> 'SKIPPED' THEN
        PERFORM metric_observe('end_to_end_seconds', json_build_object()::text,
                               NEW.completed_at - NEW.created_at);
        IF coalesce((NEW.result ->> 'reused')::boolean, false) THEN
            PERFORM metric_count('reused_analyses', json_build_object()::text);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER metric_task AFTER INSERT OR UPDATE OF status ON ai_task_registry
FOR EACH ROW EXECUTE FUNCTION metric_task();
INSERT INTO metric_counter (name, labels, n)
SELECT 'tasks_completed', json_build_object('status', status, 'kind',
            CASE WHEN status = 'DEAD' THEN 'dead_letter'
                 WHEN outcome = 'SKIPPED' AND review_state IS NULL THEN 'expanded'
                 WHEN outcome = 'SKIPPED' THEN 'skipped_by_policy'
                 ELSE 'analysed' END)::text, count(*)
FROM ai_task_registry WHERE status IN ('SUCCEEDED', 'DEAD') GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'dead_letters', json_build_object('cause', coalesce(failure_class, 'UNKNOWN'))::text,
       count(*)
FROM ai_task_registry WHERE status = 'DEAD' GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'reused_analyses', json_build_object()::text, count(*) FROM ai_task_registry
WHERE status = 'SUCCEEDED' AND coalesce(outcome, '') <> 'SKIPPED'
  AND coalesce((result ->> 'reused')::boolean, false)
HAVING count(*) > 0;
INSERT INTO metric_counter (name, labels, n)
SELECT 'ai_calls', json_build_object('service', service,
                                     'outcome', coalesce(error_class, 'ok'))::text, count(*)
FROM ai_call_log GROUP BY 2;
INSERT INTO metric_counter (name, labels, n)
SELECT 'format_anomalies', json_build_object()::text, count(*) FROM format_anomaly
HAVING count(*) > 0;
INSERT INTO metric_histogram (name, labels, le, n, total)
SELECT name, labels, (SELECT min(b.le) FROM metric_bucket AS b WHERE b.le >= v) AS bound,
       count(*), sum(v)
FROM (SELECT 'intake_latency_seconds' AS name, json_build_object()::text AS labels,
             greatest(created_at - received_at, 0.0) AS v
      FROM ai_task_registry WHERE received_at IS NOT NULL
      UNION ALL
      SELECT 'end_to_end_seconds', json_build_object()::text,
             greatest(completed_at - created_at, 0.0)
      FROM ai_task_registry
      WHERE status = 'SUCCEEDED' AND coalesce(outcome, '') <> 'SKIPPED'
        AND completed_at IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds',
             json_build_object('service', service, 'phase', 'total')::text,
             greatest(duration_s, 0.0) FROM ai_call_log
      UNION ALL
      SELECT 'ai_call_duration_seconds',
             json_build_object('service', service, 'phase', 'connect')::text,
             greatest(connect_s, 0.0) FROM ai_call_log WHERE connect_s IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds',
             json_build_object('service', service, 'phase', 'ttfb')::text,
             greatest(ttfb_s, 0.0) FROM ai_call_log WHERE ttfb_s IS NOT NULL
      UNION ALL
      SELECT 'ai_call_duration_seconds',
             json_build_object('service', service, 'phase', 'body')::text,
             greatest(body_s, 0.0) FROM ai_call_log WHERE body_s IS NOT NULL) AS observed
GROUP BY name, labels, bound;

-- schema_version --
-- Created before any migration; one row per applied migration.
CREATE TABLE IF NOT EXISTS schema_version (
    version              integer PRIMARY KEY,
    applied_at           double precision
);
