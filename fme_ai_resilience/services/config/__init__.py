"""Settings that follow the ledger's ``resilience_config`` table at run time."""

__all__: "list[str]" = []
