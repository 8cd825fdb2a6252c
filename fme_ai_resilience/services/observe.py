"""Observability: the golden signals read from the ledger, and logs that carry the trace id.

:func:`read_signals` reads the window's calls, completions and registrations, the backlog and
the format anomalies from the store and hands them to the pure
:func:`fme_ai_resilience.signals.golden_signals`. :func:`trace` sets the trace id of the task
being worked on for the current thread (a context manager); :class:`JsonLogFormatter` writes
one JSON object per log line with that ``trace_id`` on every line, so a task can be followed
through intake, processing and the Vision service's own logs (which receive the same id in
``traceparent``).
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
from typing import Any, Dict, Iterator, Optional

from ..redact import redact_text
from ..settings import Settings
from ..signals import GoldenSignals, golden_signals
from ..store.base import Store
from ..store.pipeline_rows import SAMPLE_LIMIT

__all__ = ["read_signals", "trace", "current_trace_id", "JsonLogFormatter"]

_TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("fair_trace_id", default="")


def read_signals(settings: Settings, *, store: Store, now: float,
                 window_s: Optional[float] = None) -> GoldenSignals:
    """The golden signals over the window ending at ``now`` (``alerts.window_s`` by default),
    from the ledger's samples and its state (honest counts, due work, leases, review queue)."""
    window = settings.alerts.window_s if window_s is None else window_s
    since = now - window
    return golden_signals(
        settings, calls=store.call_samples(since), completions=store.completion_samples(since),
        registrations=store.registration_samples(since),
        backlog=store.backlog(), format_anomalies=store.anomalies_since(since), now=now,
        window_s=window, sample_limit=SAMPLE_LIMIT, ledger=store.ledger_state(now=now))


@contextlib.contextmanager
def trace(trace_id: str) -> Iterator[None]:
    """Log lines written inside the block carry ``trace_id``."""
    token = _TRACE.set(trace_id)
    try:
        yield
    finally:
        _TRACE.reset(token)


def current_trace_id() -> str:
    """The trace id set by the innermost :func:`trace` block of this thread ("" outside)."""
    return _TRACE.get()


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, ``trace_id``
    and, for an exception, its type and redacted text. Secrets are redacted by pattern."""

    def format(self, record: logging.LogRecord) -> str:
        out: Dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(
                record.created, tz=datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name,
            "message": redact_text(record.getMessage()),
            "trace_id": getattr(record, "trace_id", None) or current_trace_id(),
        }
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["exception"] = {"type": type(exc).__name__, "message": redact_text(str(exc))}
        return json.dumps(out, ensure_ascii=False)
