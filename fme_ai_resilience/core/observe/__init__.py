"""The golden signals and the alerts they raise, computed from the ledger's samples."""

__all__: "list[str]" = []
