"""The compensator (WS-03): reaping, requeues, notifications, reconciliation against the
feature layer."""

__all__: "list[str]" = []
