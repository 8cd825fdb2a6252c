"""The resilience policies as pure decisions: backoff, the classification table, timeouts and
task budgets, retries and the fleet retry budget, the breaker, the pace, the degradation ladder,
threshold calibration."""

__all__: "list[str]" = []
