from fme_ai_resilience.fme import IntakeCaller


class FeatureProcessor(IntakeCaller):
    """WS-01 intake: one Survey123 submission in, one ledger task per photo.

    FME Flow runs this workspace for each Survey123 webhook. It registers every photo of the
    submission in the ledger under a key made of the feature and attachment GlobalIDs, so a
    webhook delivered twice (or replayed by FME Flow) is recognised, not processed twice.
    Past the backlog watermark it parks new work (or refuses it, in reject mode). The
    Vision AI is never called here: WS-02 does that. A body that cannot be used leaves
    through <Rejected> with fme_rejection_code set, and is kept in the ledger as a dead
    letter. Each photo leaves through Output with its fair_* attributes (the key, the
    ledger's status and the HTTP status the contract gives).

    Published parameters (blank keeps the library default, or the resilience_config row):
      FAIR_DB                          the ledger URL (required; the same in all three)
      FAIR_WEBHOOK_BODY                the webhook body (map the Automation's message here),
                                       unless the feature carries it as 'message'
      FAIR_WEBHOOK_HEADERS             the webhook headers as a JSON object (webhook.headers)
      FAIR_INTAKE_ENGINES              engines that process tasks, for the watermark
      FAIR_INTAKE_MEAN_PROCESSING_S    mean time one task takes, for the watermark
      FAIR_INTAKE_LATENCY_PROMISE_S    the promise every photo is analysed within
      FAIR_INTAKE_WATERMARK            backlog past which intake pushes back (0 derives it)
      FAIR_INTAKE_OVERLOAD_MODE        park (keep the photo, answer 202) or reject (429)
      FAIR_INTAKE_PARK_CEILING         park at most this many unfinished tasks (rows)
      FAIR_INTAKE_MAX_BODY_BYTES       the largest webhook body accepted
      FAIR_INTAKE_MAX_ATTACHMENTS      the most photos one body may carry
      FAIR_INTAKE_FEATURE_SERVICES     the FeatureServer URLs served; others are refused (422)
    """
