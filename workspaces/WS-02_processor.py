from fme_ai_resilience.fme import ProcessorCaller


class FeatureProcessor(ProcessorCaller):
    """WS-02 processor: claims due tasks from the ledger and works each one through.

    FME Flow runs this workspace every minute on its own queue. Each run claims up to
    FAIR_PROCESSING_CLAIM_LIMIT tasks under a lease, and for each one downloads the photo,
    asks the Vision AI (within its time limits, behind the shared circuit breaker), validates
    the answer and writes it back, checkpointing each stage. A failure worth retrying is
    parked in the ledger for a later run, never rejected; only what no retry can fix leaves
    through <Rejected>, and WS-03 looks after it from the ledger. Each task leaves as one
    feature with its fair_* attributes; with FAIR_WRITEBACK_SINK=collect it also carries the
    conclusion for the workspace's own writers.

    Published parameters (blank keeps the library default, or the resilience_config row):
      FAIR_DB                               the ledger URL (required; the same in all three)
      FAIR_INTAKE_LATENCY_PROMISE_S         the promise; a task's deadline is 1.5 x it
      FAIR_INTAKE_FEATURE_SERVICES          the FeatureServer URLs served: their hosts give photos
      FAIR_PROCESSING_CLAIM_LIMIT           tasks one run claims
      FAIR_PROCESSING_LEASE_S               how long a claimed task is held
      FAIR_PROCESSING_JOB_RUNTIME_LIMIT_S   the job's tm_ttc: the batch stops claiming in time
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
      FAIR_DOWNLOAD_ALLOW_HTTP_HOSTS        photo hosts reached over plain http
      FAIR_DOWNLOAD_ALLOW_PRIVATE_HOSTS     photo hosts on private addresses (on premises)
      FAIR_DOWNLOAD_HOST_HEADERS            credentials of photo hosts (JSON, secret)
      FAIR_BREAKER_FAILURE_RATE             failure rate that opens the circuit
      FAIR_BREAKER_MIN_CALLS                calls the window needs before it can open
      FAIR_BREAKER_SLOW_CALL_S              a call this long counts as slow
      FAIR_BREAKER_COOLDOWN_S               how long an open circuit stays open
      FAIR_DEGRADE_CRITICAL_TYPES           asset types always analysed
      FAIR_DEGRADE_NON_CRITICAL_TYPES       asset types a degraded pipeline may skip
      FAIR_DEGRADE_WHEN_DEGRADED            defer (default) or skip those types
      FAIR_VISION_PROVIDER                  azure-v4, google, rekognition, openai or generic
      FAIR_VISION_ENDPOINT                  the Vision AI endpoint (required in practice)
      FAIR_VISION_KEY                       its API key (secret)
      FAIR_VISION_MODEL                     the model OpenAI-compatible providers are asked for
      FAIR_VISION_SERVICE                   its name in the call log and the breaker
      FAIR_VISION_FALLBACK_ENDPOINT         the lighter model the ladder switches to from L2
      FAIR_VISION_FALLBACK_MODEL            the lighter model's name
      FAIR_VISION_PROMPT                    the prompt of OpenAI-compatible providers
      FAIR_ARCGIS_PORTAL_URL                the portal that issues tokens
      FAIR_ARCGIS_TOKEN                     a static ArcGIS token (secret)
      FAIR_ARCGIS_CLIENT_ID                 an OAuth app's client id, with its secret
      FAIR_ARCGIS_CLIENT_SECRET             the OAuth app's client secret (secret)
      FAIR_ARCGIS_USERNAME                  a named user, with a password
      FAIR_ARCGIS_PASSWORD                  the named user's password (secret)
      FAIR_ARCGIS_WEB_CONNECTION            or a named FME web connection
      FAIR_WRITEBACK_SINK                   feature_layer, table or collect (for FME's writers)
      FAIR_WRITEBACK_LAYER_URL              the layer written (blank: the submission's own)
      FAIR_WRITEBACK_TABLE_URL              a related table to add rows to instead
      FAIR_WRITEBACK_CONDITION_FIELD        the field names written
      FAIR_WRITEBACK_CONFIDENCE_FIELD
      FAIR_WRITEBACK_OUTCOME_FIELD
      FAIR_WRITEBACK_MODEL_FIELD
      FAIR_WRITEBACK_TRACE_FIELD
      FAIR_WRITEBACK_ASSESSED_AT_FIELD
      FAIR_WRITEBACK_PARENT_FIELD           the related table's feature GlobalID field
      FAIR_WRITEBACK_PHOTO_FIELD            the related table's photo GlobalID field
    """
