"""The gateway's own request metrics, kept in its process.

:class:`RequestMetrics` counts the requests one gateway answered, by handler (webhook, health,
metrics) and status code, how long each took (a histogram by handler), and the webhooks by
answer (the ``status`` of the JSON answer: accepted, duplicate, invalid, unauthorized, ...).
Thread-safe: a WSGI server answers requests on several threads. ``/metrics`` exports a
:meth:`RequestMetrics.snapshot` beside the ledger's fleet-wide figures.
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

from ..core.observe.totals import GatewayCounts, Histogram

__all__ = ["RequestMetrics"]


class RequestMetrics:
    """Counts of one gateway's requests since it started (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Dict[Tuple[str, str], int] = {}
        self._durations: Dict[str, Histogram] = {}
        self._webhooks: Dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<gateway request metrics: {sum(self._requests.values())} request(s)>"

    def observe(self, handler: str, code: int, duration_s: float,
                answer: Optional[str] = None) -> None:
        """One request answered by ``handler`` with ``code`` in ``duration_s`` seconds (and, for
        a webhook, its ``answer``)."""
        with self._lock:
            key = (handler, str(int(code)))
            self._requests[key] = self._requests.get(key, 0) + 1
            self._durations[handler] = self._durations.get(handler, Histogram()).observe(
                duration_s)
            if answer is not None:
                self._webhooks[answer] = self._webhooks.get(answer, 0) + 1

    def snapshot(self) -> GatewayCounts:
        """The counts now, as a value."""
        with self._lock:
            return GatewayCounts(requests=dict(self._requests), durations=dict(self._durations),
                                 webhooks=dict(self._webhooks))
