"""Ledger rows to values and back: JSON columns, :class:`Task` and :class:`TaskRecord`, and
the bounds of what a row keeps (error text, limits).

Both drivers hand JSON columns back as text (the PostgreSQL backend turns off psycopg2's
decoding), so one set of conversions serves both.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from ..core.checks import count
from ..core.errors import ConfigurationError, ErrorClass, FailureClass
from ..core.ledger import (DeferCause, LayerStatus, ReviewState, Stage, Status, Task, TaskOutcome,
                           TaskRecord)
from .text import clean_json, needs_cleaning

__all__ = ["to_json", "from_json", "checkpoints_of", "optional", "task_of", "record_of",
           "limit_of", "ERROR_LIMIT", "NO_LIMIT"]

#: Longest error text kept in ``last_error`` (it is redacted first).
ERROR_LIMIT = 2000
#: A limit or ceiling this large means "no limit" (and still fits a 64-bit SQL integer).
NO_LIMIT = 2 ** 62


def limit_of(field: str, value: Any, minimum: int = 0) -> int:
    """A count used as a limit or ceiling; past :data:`NO_LIMIT` it means "no limit"."""
    return min(count(field, value, minimum=minimum), NO_LIMIT)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def to_json(value: Any, field: str) -> Optional[str]:
    """``value`` as compact JSON text (None stays NULL); ConfigurationError naming ``field`` if
    it is not JSON-ready.

    Strings holding a NUL or an unpaired surrogate are stored with U+FFFD in their place
    (see :mod:`.text`), the same on every backend.
    """
    if value is None:
        return None
    try:
        text = _dumps(value)
        return _dumps(clean_json(value)) if needs_cleaning(text) else text
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(field, type(value).__name__, f"is not JSON-ready: {exc}") \
            from None


def from_json(value: Any) -> Any:
    """A JSON column's value (both drivers hand back the text)."""
    if value is None or not isinstance(value, (str, bytes, bytearray)):
        return value
    return json.loads(value)


def checkpoints_of(row: Mapping[str, Any]) -> Dict[str, Any]:
    """``{stage: data}`` for the stages a row has finished."""
    out = {}
    for stage in Stage:
        data = row.get(stage.value)
        if data is not None:
            out[stage.value] = from_json(data)
    return out


def optional(enum_type: Any, value: Any) -> Any:
    return None if value is None else enum_type(value)


def task_of(row: Mapping[str, Any]) -> Task:
    """A claimed row as the :class:`Task` the processor works on."""
    return Task(
        key=row["task_key"], lease_token=int(row["lease_token"]),
        lease_expires_at=float(row["lease_expires_at"]),
        attempt_count=int(row["attempt_count"]), payload=from_json(row["payload"]) or {},
        trace_id=row["trace_id"], source=row["source"], created_at=float(row["created_at"]),
        checkpoints=checkpoints_of(row),
        failure_class=optional(FailureClass, row["failure_class"]),
        error_class=optional(ErrorClass, row.get("error_class")),
        requeue_count=int(row.get("requeue_count") or 0),
        layer_flag=optional(LayerStatus, row.get("layer_flag")))


def record_of(row: Mapping[str, Any]) -> TaskRecord:
    """A row as a :class:`TaskRecord`."""
    return TaskRecord(
        key=row["task_key"], status=Status(row["status"]),
        attempt_count=int(row["attempt_count"]), payload=from_json(row["payload"]) or {},
        trace_id=row["trace_id"], source=row["source"], created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]), outcome=optional(TaskOutcome, row["outcome"]),
        failure_class=optional(FailureClass, row["failure_class"]),
        last_error=row["last_error"], next_attempt_at=row["next_attempt_at"],
        lease_owner=row["lease_owner"], lease_expires_at=row["lease_expires_at"],
        lease_token=int(row["lease_token"]), checkpoints=checkpoints_of(row),
        result=from_json(row["result"]), completed_at=row["completed_at"],
        error_class=optional(ErrorClass, row.get("error_class")),
        requeue_count=int(row.get("requeue_count") or 0), received_at=row.get("received_at"),
        priority=int(row.get("priority") or 0),
        defer_cause=optional(DeferCause, row.get("defer_cause")),
        layer_flag=optional(LayerStatus, row.get("layer_flag")),
        review_state=optional(ReviewState, row.get("review_state")),
        review_verdict=from_json(row.get("review_verdict")),
        review_written_at=row.get("review_written_at"))
