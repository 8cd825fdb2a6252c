"""Logs that carry the trace id of the task being worked on.

:func:`trace` sets the trace id for the current thread (a context manager);
:class:`JsonLogFormatter` writes one JSON object per log line with that ``trace_id`` on every
line, so a task can be followed through intake, processing and the Vision service's own logs
(which receive the same id in ``traceparent``).
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
from typing import Any, Dict, Iterator

from ...core.text.redact import redact_text

__all__ = ["trace", "current_trace_id", "JsonLogFormatter"]

_TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("fair_trace_id", default="")


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
