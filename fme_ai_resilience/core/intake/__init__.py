"""What intake decides: webhook bodies parsed into submissions, idempotency keys, the backlog
the engines can drain."""

__all__: "list[str]" = []
