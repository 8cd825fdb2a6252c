"""The resilience policies shared by every engine through the ledger: the circuit breaker,
the degradation ladder, the pace, the retry engine and the fleet retry budget, calibration."""

__all__: "list[str]" = []
