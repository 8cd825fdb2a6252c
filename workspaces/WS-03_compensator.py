from fme_ai_resilience.fme import CompensatorCaller


class FeatureProcessor(CompensatorCaller):
    """WS-03 compensator: puts right what the other two left behind.

    FME Flow runs this workspace every 10 minutes. Each run returns tasks whose lease lapsed
    (an engine that died mid-task) to the queue, requeues dead letters whose cause is gone,
    moves the circuit breaker and the degradation ladder on, prunes old call records and
    raises alerts. It never calls the Vision AI itself. It emits one report feature (the
    counts, the alert level) and one feature per notification, for an Emailer.

    Published parameters (blank keeps the library default, or the resilience_config row):
      FAIR_DB                            the ledger URL (required; the same in all three)
      FAIR_INTAKE_ENGINES                engines that process tasks, for the watermark
      FAIR_INTAKE_MEAN_PROCESSING_S      mean time one task takes, for the watermark
      FAIR_INTAKE_LATENCY_PROMISE_S      the promise the end-to-end alert measures against
      FAIR_INTAKE_WATERMARK              the backlog the ladder's thresholds multiply
      FAIR_RETRY_TASK_ATTEMPTS           attempts a task may spend before it is dead
      FAIR_BREAKER_FAILURE_RATE          failure rate that opens the circuit
      FAIR_BREAKER_COOLDOWN_S            how long an open circuit stays open
      FAIR_VISION_SERVICE                the Vision AI's name, whose breaker is evaluated
      FAIR_VISION_FALLBACK_ENDPOINT      set when a fallback model (and its breaker) exists
      FAIR_ARCGIS_PORTAL_URL             the credential for the layer reconciled against
      FAIR_ARCGIS_TOKEN
      FAIR_ARCGIS_CLIENT_ID
      FAIR_ARCGIS_CLIENT_SECRET
      FAIR_ARCGIS_USERNAME
      FAIR_ARCGIS_PASSWORD
      FAIR_ARCGIS_WEB_CONNECTION
      FAIR_WRITEBACK_LAYER_URL           the layer reconciled against (blank: none)
      FAIR_DEGRADE_SAMPLE_BACKLOG        backlog that starts sampling (L1)
      FAIR_DEGRADE_CRITICAL_BACKLOG      backlog that keeps only critical types (L3)
      FAIR_DEGRADE_PAUSE_BACKLOG         backlog that pauses the Vision AI (L4)
      FAIR_DEGRADE_HOLD_S                calm time before the ladder steps down
      FAIR_ALERTS_ANOMALY_RATE           share of format anomalies worth an alert
      FAIR_ALERTS_E2E_P95_WARNING_RATIO  end-to-end P95 warning, x the latency promise
      FAIR_ALERTS_BACKLOG_RATIO          backlog warning, x the watermark
      FAIR_ALERTS_WINDOW_S               the window the signals cover
      FAIR_ALERTS_DEAD_LETTER_RATIO      dead letters worth an alert, x tasks finished
      FAIR_ALERTS_REVIEW_AGE_S           review queue age worth a warning
      FAIR_COST_PER_CALL                 the price of one Vision AI call, for the spend
      FAIR_COMPENSATION_REQUEUE_BUDGET   automatic requeues of a task that spent its attempts
      FAIR_COMPENSATION_REQUEUE_BACKOFF_S      the wait before the first requeue
      FAIR_COMPENSATION_REQUEUE_BACKOFF_CAP_S  the longest wait before a requeue
      FAIR_COMPENSATION_BATCH            the most rows one step touches per run
      FAIR_COMPENSATION_RETENTION_DAYS   how long call records are kept
      FAIR_COMPENSATION_RECONCILE_WINDOW_S  how far back reconciliation looks
      FAIR_COMPENSATION_RECONCILE_BACKFILL  register what reconciliation finds missing
      FAIR_COMPENSATION_DATE_FIELD       the layer's creation date field
      FAIR_COMPENSATION_CREW_FIELD       the field gaps are counted by, besides the day
    """
