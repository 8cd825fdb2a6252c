-- File format: named blocks, as in queries.sql (SQLite-only blocks).

-- journal_wal --
-- Write-ahead log: readers never block the writer, and several processes share the file
PRAGMA journal_mode = WAL

-- synchronous_full --
-- A commit survives a power cut (Survey123 never resends what intake acknowledged)
PRAGMA synchronous = FULL

-- has_schema_version --
-- Whether the schema has ever been initialised
SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'

-- clear --
-- Delete every row of every table but schema_version (tests and drills)
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

-- completed_since_rows --
-- Tasks finished since a time: end-to-end times, whether the analysis was reused and whether
-- the task went into the review queue
SELECT created_at, completed_at, status, outcome, failure_class, review_state,
       coalesce(json_extract(result, '$.reused'), 0) AS reused
FROM ai_task_registry
WHERE completed_at >= %(since)s
ORDER BY completed_at DESC
LIMIT %(limit)s

-- existing_keys --
-- Which of the given keys (a JSON array) the ledger holds
SELECT task_key FROM ai_task_registry WHERE task_key IN (SELECT value FROM json_each(%(keys)s))
