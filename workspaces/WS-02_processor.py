from fme_ai_resilience.fme import ProcessorCaller


class FeatureProcessor(ProcessorCaller):
    """WS-02 processor: claims due tasks from the ledger and works each one through.

    FME Flow runs this workspace every minute on its own queue. Each run claims up to
    FAIR_PROCESSING_CLAIM_LIMIT tasks under a lease, and for each one downloads the photo,
    asks the Vision AI (within its time limits, behind the shared circuit breaker), validates
    the answer and writes it back, checkpointing each stage. A failure worth retrying is
    parked in the ledger for a later run, never rejected; only what no retry can fix leaves
    through <Rejected>, and WS-03 looks after it from the ledger.

    Published parameters (blank keeps the library default, or the resilience_config row):
      FAIR_DB                               the ledger URL (required; the same in all three)
      FAIR_INTAKE_LATENCY_PROMISE_S         the promise; a task's deadline is 1.5 x it
      FAIR_INTAKE_FEATURE_SERVICES          the FeatureServer URLs served: their hosts give photos
      FAIR_PROCESSING_CLAIM_LIMIT           tasks one run claims
      FAIR_PROCESSING_LEASE_S               how long a claimed task is held
      FAIR_RETRY_TASK_ATTEMPTS              attempts one task may spend
      FAIR_RETRY_BACKOFF_BASE_S             the backoff's base
      FAIR_RETRY_BACKOFF_CAP_S              the longest backoff
      FAIR_RETRY_MAX_INLINE_WAIT_S          longer waits park the task instead
      FAIR_TIMEOUTS_CONNECT_S               Vision AI connect limit
      FAIR_TIMEOUTS_TLS_S                   Vision AI TLS handshake limit
      FAIR_TIMEOUTS_TTFB_S                  Vision AI time to first byte
      FAIR_TIMEOUTS_BODY_S                  Vision AI body read limit
      FAIR_VALIDATION_CONFIDENCE_THRESHOLD  confidence at which a conclusion is accepted
      FAIR_VALIDATION_THRESHOLDS            the same by asset type, hydrant=0.8,valve=0.9
      FAIR_VALIDATION_CONDITIONS            the conditions an answer may conclude
      FAIR_DOWNLOAD_MAX_PHOTO_BYTES         the largest photo read
      FAIR_DOWNLOAD_ALLOWED_HOSTS           more photo hosts (host, .domain, host:port)
      FAIR_BREAKER_FAILURE_RATE             failure rate that opens the circuit
      FAIR_BREAKER_MIN_CALLS                calls the window needs before it can open
      FAIR_BREAKER_SLOW_CALL_S              a call this long counts as slow
      FAIR_BREAKER_COOLDOWN_S               how long an open circuit stays open
      FAIR_DEGRADE_CRITICAL_TYPES           asset types always analysed
    """
