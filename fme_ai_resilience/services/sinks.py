"""Where a conclusion goes, and the task's completion with it.

A sink finishes one task: it writes the conclusion somewhere and completes the task in the
ledger, so that a conclusion is never written twice (a task whose ``written`` checkpoint exists
is only completed) and a task is never completed without its conclusion written.

* :class:`CollectingSink` hands conclusions to the caller (the FME PythonCaller, whose own
  writers write them): the task completes when the conclusion is handed over.
* :class:`PostgresTableSink` writes an ``asset_condition`` row in the ledger's own database in
  the same transaction as the completion (never "asset updated, task still PENDING"; it works
  on the embedded SQLite ledger too).
* :class:`FeatureLayerSink` (in :mod:`.writeback`) updates the feature, or a related table,
  through ``applyEdits``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, List, Mapping, Optional, Protocol

from ..ledger import AssetRow, Stage, Task, TaskOutcome
from ..store.base import Store

__all__ = ["Conclusion", "Sink", "CollectingSink", "PostgresTableSink", "written"]


@dataclass(frozen=True)
class Conclusion:
    """What the processor concluded about one task: the outcome and the result it stores.

    ``result`` holds the condition, confidence, labels, model version, verdict reasons and
    whether the analysis was reused (``fme_ai_resilience.services.processor``); it is what the
    ledger keeps in ``result`` and what a sink writes.
    """

    task: Task
    outcome: TaskOutcome
    result: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", TaskOutcome(self.outcome))
        object.__setattr__(self, "result", MappingProxyType(dict(self.result)))

    @property
    def payload(self) -> Mapping[str, Any]:
        """The task's submission as stored (feature and attachment GlobalIDs, layer, ...)."""
        return self.task.payload


class Sink(Protocol):
    """Writes a conclusion and completes its task (see the module docstring)."""

    name: str

    def finish(self, conclusion: Conclusion, *, store: Store, now: float) -> bool:
        """Write (unless already written) and complete; False when the lease was lost.

        Raises what the write raises (a :class:`~fme_ai_resilience.errors.ResilienceError`
        carrying an ``error_class``) for the processor to retry, park or bury.
        """


def _complete(conclusion: Conclusion, *, store: Store, now: float) -> bool:
    task = conclusion.task
    return store.complete(task.key, task.lease_token, conclusion.outcome,
                          dict(conclusion.result), now=now)


class CollectingSink:
    """Keeps the conclusions for the caller; :meth:`take` hands them over (and forgets them).

    For the FME adapter: the PythonCaller emits one feature per conclusion and FME's writers
    write it. The ledger completes the task when the conclusion is collected, so a translation
    that fails after that point loses the write (not the task's record): prefer the feature
    layer or the table sink where every write must land.
    """

    name = "collect"

    def __init__(self) -> None:
        self._collected: List[Conclusion] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CollectingSink(held={len(self._collected)})"

    def finish(self, conclusion: Conclusion, *, store: Store, now: float) -> bool:
        if not _complete(conclusion, store=store, now=now):
            return False
        with self._lock:
            self._collected.append(conclusion)
        return True

    def take(self) -> List[Conclusion]:
        """The conclusions collected since the last call, oldest first."""
        with self._lock:
            out, self._collected = self._collected, []
        return out


class PostgresTableSink:
    """An ``asset_condition`` row per task, written in the completion's own transaction.

    Named for its production place (the PostgreSQL ledger, where other systems read the table);
    it writes into whichever ledger database the store holds, the embedded SQLite one included.
    """

    name = "table"

    def __repr__(self) -> str:
        return "PostgresTableSink()"

    def finish(self, conclusion: Conclusion, *, store: Store, now: float) -> bool:
        task, result = conclusion.task, conclusion.result
        payload = task.payload
        confidence: Optional[float] = result.get("confidence")
        row = AssetRow(task_key=task.key, feature_global_id=str(payload["feature_global_id"]),
                       outcome=conclusion.outcome,
                       attachment_global_id=payload.get("attachment_global_id"),
                       asset_type=payload.get("asset_type"), condition=result.get("condition"),
                       confidence=confidence, model_version=result.get("model_version"),
                       trace_id=task.trace_id)
        return store.complete_with_asset(task.key, task.lease_token, conclusion.outcome,
                                         dict(result), row, now=now)


def written(task: Task) -> bool:
    """Whether the task's conclusion was already written (only its completion is left)."""
    return task.done(Stage.WRITTEN)
