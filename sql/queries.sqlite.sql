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
DELETE FROM intake_counter;
DELETE FROM intake_refusal;
