-- File format: named blocks, as in procrastinate's queries.sql.
    -- name --
    -- description
    -- one statement, %(name)s placeholders (SQLite gets them as :name)
-- Shared by both dialects; queries.<dialect>.sql adds or overrides blocks of the same name.
-- Every token-carrying write matches on key, lease token and PROCESSING: a stale token, or a
-- task that was reaped or finished meanwhile, matches no row and changes nothing.

-- schema_versions --
-- Applied migrations
SELECT version FROM schema_version ORDER BY version

-- record_schema_version --
-- Remember one applied migration
INSERT INTO schema_version (version, applied_at) VALUES (%(version)s, %(now)s)

-- existing --
-- The row a registration collides with, if any
SELECT status, outcome FROM ai_task_registry WHERE task_key = %(key)s

-- backlog --
-- In-progress rows, counted through the partial index and never past the limit (the SQLite
-- registration's check; the intake's measure of a backlog past the watermark on any backend)
SELECT count(*) AS n FROM (
    SELECT 1 FROM ai_task_registry
    WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEFERRED')
    LIMIT %(count_limit)s) AS capped

-- insert_task --
-- A new task (SQLite registration; the PostgreSQL one is a single statement)
INSERT INTO ai_task_registry (task_key, status, source, trace_id, feature_global_id,
    attachment_global_id, event_type, payload, next_attempt_at, created_at, updated_at,
    received_at, priority)
VALUES (%(key)s, %(status)s, %(source)s, %(trace_id)s, %(feature_global_id)s,
    %(attachment_global_id)s, %(event_type)s, %(payload)s, %(due_at)s, %(now)s, %(now)s,
    %(received_at)s, %(priority)s)

-- insert_dead_letter --
-- Evidence of something that never became a task, kept once per key
INSERT INTO ai_task_registry (task_key, status, source, trace_id, payload, failure_class,
    last_error, created_at, updated_at, completed_at)
VALUES (%(key)s, 'DEAD', %(source)s, %(trace_id)s, %(payload)s, %(failure_class)s,
    %(error)s, %(now)s, %(now)s, %(now)s)
ON CONFLICT (task_key) DO NOTHING

-- due_keys --
-- Due tasks in claim order (SQLite claim, inside BEGIN IMMEDIATE): critical asset types first,
-- then the longest due
SELECT task_key, next_attempt_at AS due, priority FROM ai_task_registry
WHERE status IN ('PENDING', 'FAILED', 'DEFERRED') AND next_attempt_at <= %(now)s
ORDER BY priority DESC, next_attempt_at, created_at
LIMIT %(limit)s

-- lease_one --
-- Lease one task to its new holder with a fresh fencing token (SQLite claim); while leased,
-- next_attempt_at is the lease expiry: when the task is due again if its holder vanishes
UPDATE ai_task_registry
SET status = 'PROCESSING', lease_token = lease_token + 1, lease_owner = %(owner)s,
    lease_expires_at = %(expires_at)s, next_attempt_at = %(expires_at)s, defer_cause = NULL,
    updated_at = %(now)s
WHERE task_key = %(key)s AND status IN ('PENDING', 'FAILED', 'DEFERRED')

-- get --
-- One row
SELECT * FROM ai_task_registry WHERE task_key = %(key)s

-- checkpoint_downloaded --
-- The photo was downloaded
UPDATE ai_task_registry SET downloaded = %(data)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- checkpoint_analyzed --
-- The validated AI result
UPDATE ai_task_registry SET analyzed = %(data)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- checkpoint_written --
-- The result was written back to the feature layer
UPDATE ai_task_registry SET written = %(data)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- complete --
-- PROCESSING -> SUCCEEDED
UPDATE ai_task_registry
SET status = 'SUCCEEDED', outcome = %(outcome)s, result = %(result)s, completed_at = %(now)s,
    lease_expires_at = NULL, next_attempt_at = NULL, review_state = %(review_state)s,
    updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- fail --
-- PROCESSING -> FAILED, due again at retry_at; counts the attempts that failed
UPDATE ai_task_registry
SET status = 'FAILED', attempt_count = attempt_count + %(attempts)s, error_class = %(error_class)s,
    last_error = %(error)s, next_attempt_at = %(retry_at)s, lease_expires_at = NULL,
    updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- defer --
-- PROCESSING -> DEFERRED until a time, with its cause ('degraded': held back by the ladder);
-- no attempt counted
UPDATE ai_task_registry
SET status = 'DEFERRED', next_attempt_at = %(until)s, lease_expires_at = NULL,
    defer_cause = %(cause)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- bury --
-- PROCESSING -> DEAD with a failure class
UPDATE ai_task_registry
SET status = 'DEAD', failure_class = %(failure_class)s, last_error = %(error)s,
    completed_at = %(now)s, lease_expires_at = NULL, next_attempt_at = NULL,
    updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- reap_bury --
-- Expired leases whose attempt would exhaust the budget -> DEAD/BUDGET
UPDATE ai_task_registry
SET status = 'DEAD', failure_class = 'BUDGET', attempt_count = attempt_count + 1,
    last_error = 'lease expired with the attempt budget spent', completed_at = %(now)s,
    lease_expires_at = NULL, next_attempt_at = NULL, updated_at = %(now)s
WHERE status = 'PROCESSING' AND lease_expires_at <= %(now)s
  AND attempt_count + 1 >= %(max_attempts)s

-- reap_requeue --
-- Expired leases with attempts left -> PENDING, counting the lost attempt
UPDATE ai_task_registry
SET status = 'PENDING', attempt_count = attempt_count + 1,
    last_error = 'lease expired', next_attempt_at = %(now)s, lease_expires_at = NULL,
    updated_at = %(now)s
WHERE status = 'PROCESSING' AND lease_expires_at <= %(now)s
  AND attempt_count + 1 < %(max_attempts)s

-- requeue_key --
-- One dead letter back to PENDING as a fresh task: attempts reset, the last life's error and
-- lease holder cleared, checkpoints kept (optionally only if of a failure class). Evidence of
-- a body that never became a task (INVALID_PAYLOAD: it never parsed; UNKNOWN_SERVICE: it named a
-- service the deployment does not serve) is no task: it moves only when forced.
UPDATE ai_task_registry
SET status = 'PENDING', attempt_count = 0, failure_class = NULL, outcome = NULL,
    error_class = NULL, last_error = NULL, lease_owner = NULL, lease_expires_at = NULL,
    completed_at = NULL, next_attempt_at = %(now)s, updated_at = %(now)s
WHERE task_key = %(key)s AND status = 'DEAD'
  AND (failure_class = %(failure_class)s OR %(any_class)s)
  AND (coalesce(failure_class, '') NOT IN ('INVALID_PAYLOAD', 'UNKNOWN_SERVICE') OR %(force)s)

-- requeue_class --
-- Every dead letter of one failure class back to PENDING, as requeue_key does for one
UPDATE ai_task_registry
SET status = 'PENDING', attempt_count = 0, failure_class = NULL, outcome = NULL,
    error_class = NULL, last_error = NULL, lease_owner = NULL, lease_expires_at = NULL,
    completed_at = NULL, next_attempt_at = %(now)s, updated_at = %(now)s
WHERE status = 'DEAD' AND failure_class = %(failure_class)s
  AND (failure_class NOT IN ('INVALID_PAYLOAD', 'UNKNOWN_SERVICE') OR %(force)s)

-- counts --
-- The water level: rows by status
SELECT status, count(*) AS n FROM ai_task_registry GROUP BY status

-- dead_letters --
-- Dead letters by cause
SELECT failure_class, count(*) AS n FROM ai_task_registry
WHERE status = 'DEAD' GROUP BY failure_class

-- completed_since --
-- Tasks an engine finished (SUCCEEDED or DEAD) at or after a time: the measured drain. A row
-- no engine ever held (lease_token 0: the dead letter of an invalid body) is no drained work
SELECT count(*) AS n FROM ai_task_registry
WHERE completed_at >= %(since)s AND lease_token > 0

-- invalid_recent --
-- Dead letters of invalid bodies kept since a time, counted through their index up to a limit
SELECT count(*) AS n FROM (
    SELECT 1 FROM ai_task_registry
    WHERE status = 'DEAD' AND failure_class = 'INVALID_PAYLOAD' AND created_at >= %(since)s
    LIMIT %(count_limit)s) AS capped

-- invalid_total --
-- Dead letters of invalid bodies kept in all, counted through their index up to a limit
SELECT count(*) AS n FROM (
    SELECT 1 FROM ai_task_registry
    WHERE status = 'DEAD' AND failure_class = 'INVALID_PAYLOAD'
    LIMIT %(count_limit)s) AS capped

-- refusal_seen_again --
-- A refused body delivered again: count the delivery on its record
UPDATE intake_refusal
SET refusals = refusals + 1, last_refused_at = %(now)s, delivery_id = %(delivery_id)s,
    reason = %(reason)s, status_code = %(status_code)s, photos_refused = %(photos_refused)s,
    photos_stored = %(photos_stored)s
WHERE refusal_key = %(key)s

-- refusal_total --
-- Refusal records, counted up to a limit
SELECT count(*) AS n FROM (SELECT 1 FROM intake_refusal LIMIT %(count_limit)s) AS capped

-- insert_refusal --
-- The record of a refused body (a concurrent insert of the same body wins, this one counts)
INSERT INTO intake_refusal (refusal_key, reason, status_code, feature_global_id, service_url,
    layer_url, delivery_id, event_type, records, photos_refused, photos_stored, refusals,
    first_refused_at, last_refused_at)
VALUES (%(key)s, %(reason)s, %(status_code)s, %(feature_global_id)s, %(service_url)s,
    %(layer_url)s, %(delivery_id)s, %(event_type)s, %(records)s, %(photos_refused)s,
    %(photos_stored)s, 1, %(now)s, %(now)s)
ON CONFLICT (refusal_key) DO UPDATE SET refusals = intake_refusal.refusals + 1,
    last_refused_at = excluded.last_refused_at, delivery_id = excluded.delivery_id

-- refusals_since --
-- Refusal records whose last delivery is at or after a time, newest first (reconciliation)
SELECT * FROM intake_refusal WHERE last_refused_at >= %(since)s
ORDER BY last_refused_at DESC, refusal_key
LIMIT %(limit)s

-- refusal_counts --
-- Refused bodies and deliveries by reason
SELECT reason, count(*) AS bodies, sum(refusals) AS deliveries FROM intake_refusal
GROUP BY reason

-- bump_counter --
-- Count one more of something intake could not keep
INSERT INTO intake_counter (name, n, first_at, last_at) VALUES (%(name)s, 1, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET n = intake_counter.n + 1, last_at = excluded.last_at

-- intake_counters --
-- What intake could not keep, by name
SELECT name, n, first_at, last_at FROM intake_counter

-- record_call --
-- One outbound call
INSERT INTO ai_call_log (service, started_at, duration_s, error_class, status_code, retry,
    trace_id, task_key, connect_s, ttfb_s, body_s, phases, down)
VALUES (%(service)s, %(started_at)s, %(duration_s)s, %(error_class)s, %(status_code)s,
    %(retry)s, %(trace_id)s, %(task_key)s, %(connect_s)s, %(ttfb_s)s, %(body_s)s, %(phases)s,
    %(down)s)

-- call_window --
-- Calls, failures, slow calls and retries of one service since a time; a time-to-first-byte
-- timeout that did not say the service is down (slow is not down) is no failure
SELECT count(*) AS calls,
       count(error_class) - coalesce(sum(CASE WHEN error_class = 'TTFB_TIMEOUT' AND NOT down
                                              THEN 1 ELSE 0 END), 0) AS failures,
       coalesce(sum(CASE WHEN duration_s >= %(slow_s)s THEN 1 ELSE 0 END), 0) AS slow,
       coalesce(sum(CASE WHEN retry THEN 1 ELSE 0 END), 0) AS retries
FROM ai_call_log WHERE service = %(service)s AND started_at >= %(since)s

-- recent_calls --
-- A service's latest calls, newest first: their error class (NULL: a success) and task
SELECT error_class, task_key FROM ai_call_log WHERE service = %(service)s
ORDER BY started_at DESC
LIMIT %(limit)s

-- recent_retries --
-- A service's latest calls, newest first: their error class, task and whether each was a retry
SELECT error_class, task_key, retry FROM ai_call_log WHERE service = %(service)s
ORDER BY started_at DESC
LIMIT %(limit)s

-- record_anomaly --
-- One answer that failed validation
INSERT INTO format_anomaly (provider, observed_at, errors, excerpt, model_version, task_key,
    trace_id)
VALUES (%(provider)s, %(observed_at)s, %(errors)s, %(excerpt)s, %(model_version)s,
    %(task_key)s, %(trace_id)s)

-- get_config --
-- Run-time configuration
SELECT name, value FROM resilience_config

-- set_config --
-- Upsert one setting
INSERT INTO resilience_config (name, value, updated_at) VALUES (%(name)s, %(value)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at

-- recent_anomalies --
-- Format anomalies observed at or after a time, newest first
SELECT provider, observed_at, errors, excerpt, model_version, task_key, trace_id
FROM format_anomaly WHERE observed_at >= %(since)s
ORDER BY observed_at DESC, id DESC
LIMIT %(limit)s

-- breaker_get --
-- One service's circuit
SELECT * FROM circuit_state WHERE service = %(service)s

-- breaker_ensure --
-- Create a missing circuit CLOSED; an existing one (perhaps open) is left exactly as it is
INSERT INTO circuit_state (service, changed_at, updated_at)
VALUES (%(service)s, %(now)s, %(now)s)
ON CONFLICT (service) DO NOTHING

-- breaker_list --
-- Every circuit
SELECT * FROM circuit_state ORDER BY service

-- breaker_swap --
-- Compare-and-set: applies only if nobody moved the circuit since it was read
UPDATE circuit_state
SET state = %(state)s, mode = %(mode)s, generation = %(generation)s,
    changed_at = %(changed_at)s, open_until = %(open_until)s, trips = %(trips)s,
    updated_at = %(changed_at)s
WHERE service = %(service)s AND generation = %(expected)s

-- probe_clear --
-- End the half-open round: its slots go with it
DELETE FROM circuit_probe WHERE service = %(service)s

-- probe_slot --
-- One probe slot of a new half-open round
INSERT INTO circuit_probe (service, slot, generation) VALUES (%(service)s, %(slot)s, %(generation)s)

-- probe_claim --
-- Take one free slot (never claimed, or claimed and silent past the probe timeout) with a new
-- token (SQLite: inside BEGIN IMMEDIATE, so one claimer at a time)
UPDATE circuit_probe
SET token = token + 1, claimed_at = %(now)s
WHERE service = %(service)s AND slot = (
    SELECT slot FROM circuit_probe
    WHERE service = %(service)s AND generation = %(generation)s AND ok IS NULL
      AND (claimed_at IS NULL OR claimed_at <= %(stale_before)s)
    ORDER BY slot LIMIT 1)
RETURNING slot, token

-- probe_report --
-- A probe's result, accepted only from the slot's current claim and only once
UPDATE circuit_probe SET ok = %(ok)s, reported_at = %(now)s
WHERE service = %(service)s AND generation = %(generation)s AND slot = %(slot)s
  AND token = %(token)s AND ok IS NULL

-- probe_fail_silent --
-- Claimed probes silent past the probe timeout count as failed (a late report is then refused)
UPDATE circuit_probe SET ok = %(failed)s, reported_at = %(now)s
WHERE service = %(service)s AND generation = %(generation)s AND ok IS NULL
  AND claimed_at IS NOT NULL AND claimed_at <= %(stale_before)s

-- probe_tally --
-- Reported probe results of one half-open round
SELECT coalesce(sum(CASE WHEN ok THEN 1 ELSE 0 END), 0) AS successes,
       coalesce(sum(CASE WHEN ok THEN 0 ELSE 1 END), 0) AS failures
FROM circuit_probe
WHERE service = %(service)s AND generation = %(generation)s AND ok IS NOT NULL

-- degrade_get --
-- The fleet's degradation ladder
SELECT * FROM degradation_state WHERE scope = 'fleet'

-- degrade_ensure --
-- Create the ladder at L0 if missing; never overwrite it
INSERT INTO degradation_state (scope, changed_at, updated_at)
VALUES ('fleet', %(now)s, %(now)s)
ON CONFLICT (scope) DO NOTHING

-- degrade_swap --
-- Compare-and-set the ladder on its generation
UPDATE degradation_state
SET level = %(level)s, override_level = %(override)s, generation = %(generation)s,
    changed_at = %(changed_at)s, calm_since = %(calm_since)s, updated_at = %(now)s
WHERE scope = 'fleet' AND generation = %(expected)s

-- renew --
-- Extend a live lease (fenced): the holder is still working, nobody may claim the task
UPDATE ai_task_registry
SET lease_expires_at = %(expires_at)s, next_attempt_at = %(expires_at)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- asset_upsert --
-- The asset-condition row of one task (same transaction as its completion)
INSERT INTO asset_condition (task_key, feature_global_id, attachment_global_id, asset_type,
    condition, confidence, outcome, model_version, trace_id, assessed_at)
VALUES (%(key)s, %(feature_global_id)s, %(attachment_global_id)s, %(asset_type)s,
    %(condition)s, %(confidence)s, %(outcome)s, %(model_version)s, %(trace_id)s, %(now)s)
ON CONFLICT (task_key) DO UPDATE SET condition = excluded.condition,
    confidence = excluded.confidence, outcome = excluded.outcome,
    model_version = excluded.model_version, trace_id = excluded.trace_id,
    assessed_at = excluded.assessed_at

-- asset_get --
-- One asset-condition row
SELECT * FROM asset_condition WHERE task_key = %(key)s

-- analysis_get --
-- The validated result already paid for, for one photo content and model configuration
SELECT result FROM analysis_cache WHERE fingerprint = %(fingerprint)s

-- analysis_put --
-- Remember a validated result (the first one stays)
INSERT INTO analysis_cache (fingerprint, result, created_at, last_used_at)
VALUES (%(fingerprint)s, %(result)s, %(now)s, %(now)s)
ON CONFLICT (fingerprint) DO NOTHING

-- analysis_claim --
-- Claim the fingerprint for one lease (task and fencing token) until a time, unless another
-- lease holds a live claim (another task, or an earlier holder of this one whose call may still
-- be in flight); a row comes back when the claim is this lease's
INSERT INTO analysis_claim (fingerprint, task_key, lease_token, until)
VALUES (%(fingerprint)s, %(key)s, %(token)s, %(until)s)
ON CONFLICT (fingerprint) DO UPDATE SET task_key = excluded.task_key,
    lease_token = excluded.lease_token, until = excluded.until
WHERE analysis_claim.until <= %(now)s
   OR (analysis_claim.task_key = excluded.task_key
       AND analysis_claim.lease_token = excluded.lease_token)
RETURNING task_key

-- analysis_release --
-- Give a claim up (its lease parked without an answer); another lease's claim is left alone
DELETE FROM analysis_claim
WHERE fingerprint = %(fingerprint)s AND task_key = %(key)s AND lease_token = %(token)s

-- prune_claims --
-- Claims whose time is long past
DELETE FROM analysis_claim WHERE until < %(before)s

-- analysis_reused --
-- Count one reuse of a remembered result
UPDATE analysis_cache SET reused = reused + 1, last_used_at = %(now)s
WHERE fingerprint = %(fingerprint)s

-- notify --
-- A notification for people (FME's Emailer), kept once per kind and task
INSERT INTO notification (kind, task_key, subject, body, created_at)
VALUES (%(kind)s, %(key)s, %(subject)s, %(body)s, %(now)s)
ON CONFLICT (kind, task_key) DO NOTHING

-- notifications_pending --
-- Notifications not yet handed over, oldest first
SELECT id, kind, task_key, subject, body, created_at FROM notification
WHERE sent_at IS NULL ORDER BY created_at, id LIMIT %(limit)s

-- notification_sent --
-- A notification handed over (to FME's Emailer)
UPDATE notification SET sent_at = %(now)s WHERE id = %(id)s AND sent_at IS NULL

-- notification_given_back --
-- A notification handed over at %(sent_at)s that did not reach its reader: waiting again
UPDATE notification SET sent_at = NULL WHERE id = %(id)s AND sent_at = %(sent_at)s

-- prune_calls --
-- Call-log rows older than the retention
DELETE FROM ai_call_log WHERE started_at < %(before)s

-- prune_anomalies --
-- Format anomalies older than the retention
DELETE FROM format_anomaly WHERE observed_at < %(before)s

-- dead_letter_rows --
-- Dead letters, newest first, optionally of one failure class
SELECT * FROM ai_task_registry
WHERE status = 'DEAD' AND (failure_class = %(failure_class)s OR %(any_class)s)
ORDER BY completed_at DESC, task_key
LIMIT %(limit)s OFFSET %(offset)s

-- requeue_candidates --
-- Dead letters of one class whose requeue budget is not spent, oldest first
SELECT task_key, requeue_count FROM ai_task_registry
WHERE status = 'DEAD' AND failure_class = %(failure_class)s
  AND requeue_count < %(max_requeues)s
ORDER BY completed_at, task_key
LIMIT %(limit)s

-- requeue_later --
-- One dead letter back to PENDING, due at a later time, spending one requeue of its budget
UPDATE ai_task_registry
SET status = 'PENDING', attempt_count = 0, failure_class = NULL, outcome = NULL,
    error_class = NULL, last_error = NULL, lease_owner = NULL, lease_expires_at = NULL,
    completed_at = NULL, requeue_count = requeue_count + 1, next_attempt_at = %(due_at)s,
    updated_at = %(now)s
WHERE task_key = %(key)s AND status = 'DEAD' AND requeue_count = %(requeue_count)s

-- calls_since --
-- Outbound calls since a time, newest first (golden signals)
SELECT service, started_at, duration_s, error_class, retry FROM ai_call_log
WHERE started_at >= %(since)s
ORDER BY started_at DESC
LIMIT %(limit)s

-- registered_since --
-- Tasks registered since a time with their intake times (golden signals)
SELECT created_at, received_at, source FROM ai_task_registry
WHERE created_at >= %(since)s
ORDER BY created_at DESC
LIMIT %(limit)s

-- anomalies_since --
-- How many format anomalies were observed since a time
SELECT count(*) AS n FROM format_anomaly WHERE observed_at >= %(since)s

-- pace_claim --
-- Take the next call slot of a paced service if it starts by a time: its next slot moves one
-- interval on, and the slot taken comes back (no row when the service is not paced or its
-- next slot starts later: then pace_next tells which)
UPDATE call_pace
SET next_at = CASE WHEN next_at > %(now)s THEN next_at ELSE %(now)s END + interval_s
WHERE service = %(service)s AND interval_s > 0 AND next_at <= %(latest)s
RETURNING next_at - interval_s AS slot_at, interval_s

-- pace_next --
-- A paced service's next free slot, not taken (no row when the service is not paced)
SELECT CASE WHEN next_at > %(now)s THEN next_at ELSE %(now)s END AS slot_at, interval_s
FROM call_pace WHERE service = %(service)s AND interval_s > 0

-- pace_shown --
-- What a rate-limited service showed it allows: its latest 429 in a time range and the calls
-- it took after that 429 and before the range's end: those logged (anything but a 429) and
-- those still in flight (their slots)
SELECT refused.at AS refused_at,
       (SELECT count(*) FROM ai_call_log c
        WHERE c.service = %(service)s AND c.started_at > refused.at
          AND c.started_at < %(before)s
          AND (c.error_class IS NULL OR c.error_class <> 'RATE_LIMITED'))
       + (SELECT count(*) FROM call_slot s
          WHERE s.service = %(service)s AND s.started_at > refused.at
            AND s.started_at < %(before)s AND s.until > %(before)s) AS taken
FROM (SELECT max(started_at) AS at FROM ai_call_log
      WHERE service = %(service)s AND error_class = 'RATE_LIMITED'
        AND started_at >= %(since)s AND started_at < %(before)s) AS refused
WHERE refused.at IS NOT NULL

-- pace_slow --
-- Space a service's calls at least an interval apart, and none before a time (a 429 said so);
-- neither is ever shortened
INSERT INTO call_pace (service, interval_s, next_at)
VALUES (%(service)s, %(interval)s, %(not_before)s)
ON CONFLICT (service) DO UPDATE
SET interval_s = CASE WHEN call_pace.interval_s > excluded.interval_s
                      THEN call_pace.interval_s ELSE excluded.interval_s END,
    next_at = CASE WHEN call_pace.next_at > excluded.next_at
                   THEN call_pace.next_at ELSE excluded.next_at END

-- pace_get --
-- A service's call interval (0 or no row: not paced)
SELECT interval_s FROM call_pace WHERE service = %(service)s

-- pace_relax --
-- One call went through: a paced service's interval shrinks by a factor, and the pace is off
-- once it is below a floor
UPDATE call_pace
SET interval_s = CASE WHEN interval_s * %(factor)s < %(floor)s THEN 0
                      ELSE interval_s * %(factor)s END
WHERE service = %(service)s AND interval_s > 0

-- flag_layer --
-- The interim value written on the layer for a task still owed (fenced: written once)
UPDATE ai_task_registry SET layer_flag = %(flag)s, updated_at = %(now)s
WHERE task_key = %(key)s AND lease_token = %(token)s AND status = 'PROCESSING'

-- release_held --
-- The ladder stepped down: every photo it held back is due now (claimed critical first)
UPDATE ai_task_registry SET next_attempt_at = %(now)s, updated_at = %(now)s
WHERE status = 'DEFERRED' AND defer_cause = 'degraded' AND next_attempt_at > %(now)s

-- ladder_backlog --
-- In-progress rows the ladder climbs on: those it holds back are left out (holding a photo
-- back must not keep the ladder up), counted through the partial index up to a limit
SELECT count(*) AS n FROM (
    SELECT 1 FROM ai_task_registry
    WHERE status IN ('PENDING', 'PROCESSING', 'FAILED', 'DEFERRED')
      AND coalesce(defer_cause, '') <> 'degraded'
    LIMIT %(count_limit)s) AS capped

-- held_back --
-- Photos the degradation ladder holds back (owed, shown on the layer as awaiting analysis)
SELECT count(*) AS n FROM ai_task_registry
WHERE status = 'DEFERRED' AND defer_cause = 'degraded'

-- outcome_counts --
-- Finished tasks by outcome and review state: analysed, skipped by policy, expanded, reviewed
SELECT outcome, review_state, count(*) AS n FROM ai_task_registry
WHERE status = 'SUCCEEDED' GROUP BY outcome, review_state

-- review_stats --
-- The review queue's size and the completion time of its oldest photo
SELECT count(*) AS n, min(completed_at) AS oldest FROM ai_task_registry
WHERE review_state = 'OPEN'

-- review_list --
-- The review queue, oldest first
SELECT * FROM ai_task_registry WHERE review_state = %(state)s
ORDER BY completed_at, task_key
LIMIT %(limit)s OFFSET %(offset)s

-- review_resolve --
-- Record a reviewer's verdict, once: a photo already resolved matches no row. The recorder
-- holds the verdict's write-back until a time (lease_expires_at, unused on a finished row)
UPDATE ai_task_registry
SET review_state = 'RESOLVED', review_verdict = %(verdict)s, lease_expires_at = %(until)s,
    updated_at = %(now)s
WHERE task_key = %(key)s AND review_state = 'OPEN'

-- review_write_claim --
-- Take over the write-back of a verdict not written yet, unless another process holds it
UPDATE ai_task_registry SET lease_expires_at = %(until)s, updated_at = %(now)s
WHERE task_key = %(key)s AND review_state = 'RESOLVED' AND review_written_at IS NULL
  AND coalesce(lease_expires_at, 0) <= %(now)s

-- review_write_release --
-- A write-back that failed lets the next resolve write the verdict at once
UPDATE ai_task_registry SET lease_expires_at = NULL
WHERE task_key = %(key)s AND review_state = 'RESOLVED' AND review_written_at IS NULL

-- review_written --
-- The verdict reached the layer (its write-back is never sent twice)
UPDATE ai_task_registry SET review_written_at = %(now)s, lease_expires_at = NULL,
    updated_at = %(now)s
WHERE task_key = %(key)s AND review_state = 'RESOLVED' AND review_written_at IS NULL

-- due_stats --
-- Work due now: how much, since when it is due, and the registration of the oldest
SELECT count(*) AS n, min(next_attempt_at) AS oldest_due, min(created_at) AS oldest_created
FROM ai_task_registry
WHERE status IN ('PENDING', 'FAILED', 'DEFERRED') AND next_attempt_at <= %(now)s

-- last_progress --
-- When an engine last finished a task (SUCCEEDED or DEAD), through the completion index
SELECT max(completed_at) AS at FROM ai_task_registry
WHERE completed_at IS NOT NULL AND lease_token > 0

-- expired_leases --
-- Leases nobody renewed: their holder stopped (crashed, hung or cut off), through the lease index
SELECT count(*) AS n, min(lease_expires_at) AS oldest FROM ai_task_registry
WHERE status = 'PROCESSING' AND lease_expires_at <= %(now)s

-- down_streak --
-- A service's latest calls, newest logged first: whether each said the service is down, and
-- its task
SELECT down, task_key FROM ai_call_log WHERE service = %(service)s
ORDER BY id DESC
LIMIT %(limit)s

-- limit_ensure --
-- A service's concurrency limit row, at its start when it has none (an existing row is kept)
INSERT INTO call_limit (service, limit_value, updated_at)
VALUES (%(service)s, %(start)s, %(now)s)
ON CONFLICT (service) DO NOTHING

-- limit_get --
-- A service's concurrency limit (no row: never used)
SELECT limit_value, ttfb_s, rtt_long_s, rtt_peak_s FROM call_limit WHERE service = %(service)s

-- limit_lock --
-- A service's concurrency limit, read to be changed (SQLite: the transaction holds the file's
-- write lock already)
SELECT limit_value, ttfb_s, rtt_long_s, rtt_peak_s FROM call_limit WHERE service = %(service)s

-- limit_put --
-- A service's concurrency limit after a call
UPDATE call_limit
SET limit_value = %(limit)s, ttfb_s = %(ttfb_s)s, rtt_long_s = %(rtt_long_s)s,
    rtt_peak_s = %(rtt_peak_s)s, updated_at = %(now)s
WHERE service = %(service)s

-- slot_prune_all --
-- Calls in flight of every service whose time has run out
DELETE FROM call_slot WHERE until <= %(now)s

-- slot_count --
-- The calls in flight of a service
SELECT count(*) AS n FROM call_slot WHERE service = %(service)s AND until > %(now)s

-- slot_take --
-- One more call in flight, counted until a time unless it ends first
INSERT INTO call_slot (service, holder, started_at, until)
VALUES (%(service)s, %(holder)s, %(now)s, %(until)s)
RETURNING id

-- slot_free --
-- A call that ended: no longer in flight
DELETE FROM call_slot WHERE id = %(slot)s AND service = %(service)s

-- slot_hold --
-- A call the engine gave up on: in flight until the service could no longer be working on it
UPDATE call_slot SET until = %(until)s WHERE id = %(slot)s AND service = %(service)s

-- metric_counters --
-- The monotonic counters the ledger's triggers keep, by name and labels (a JSON object)
SELECT name, labels, sum(n) AS n FROM metric_counter GROUP BY name, labels
ORDER BY name, labels

-- metric_histograms --
-- The histograms the ledger's triggers keep: observations and their sum per bucket
SELECT name, labels, le, sum(n) AS n, sum(total) AS total FROM metric_histogram
GROUP BY name, labels, le ORDER BY name, labels, le

-- metric_buckets --
-- The histograms' bucket bounds (the last one +Inf)
SELECT le FROM metric_bucket ORDER BY le
