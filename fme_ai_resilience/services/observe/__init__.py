"""The golden signals read from the ledger, and logs that carry the trace id."""

__all__: "list[str]" = []
