"""The pure core: values and decisions, no I/O, no clock reads, no environment, randomness only
from an injected ``random.Random``; grouped by the capabilities ``services/`` shares
(docs/architecture.md)."""

__all__: "list[str]" = []
