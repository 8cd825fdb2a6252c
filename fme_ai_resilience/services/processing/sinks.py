"""Where a conclusion goes, and the task's completion with it.

A sink finishes one task: it writes the conclusion somewhere and completes the task in the
ledger, so that a conclusion is never written twice (a task whose ``written`` checkpoint exists
is only completed) and a task is never completed without its conclusion written. A sink may
also ``flag`` a task still owed (AWAITING_ANALYSIS: its analysis held back) or write a
reviewer's verdict (REVIEWED), through the same write, without finishing the task.

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

from ...core.errors import ConfigurationError
from ...core.ledger import AssetRow, LayerStatus, Stage, Task, TaskOutcome
from ...store.base import Store
from ...core.intake.submission import Submission

__all__ = ["Conclusion", "Sink", "CollectingSink", "PostgresTableSink", "written"]


@dataclass(frozen=True)
class Conclusion:
    """What the processor concluded about one task: the outcome and the result it stores.

    ``result`` holds the condition, confidence, labels, model version, verdict reasons and
    whether the analysis was reused (``fme_ai_resilience.services.processing.processor``); it is
    what the ledger keeps in ``result`` and what a sink writes. ``layer`` is what the outcome field
    shows (by default the outcome's own value, MANUAL_REVIEW for SKIPPED); a flag or a verdict
    has a ``layer`` value and no outcome (the task is not finished by it).
    """

    task: Task
    outcome: Optional[TaskOutcome]
    result: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    layer: Optional[LayerStatus] = None

    def __post_init__(self) -> None:
        if self.outcome is not None:
            object.__setattr__(self, "outcome", TaskOutcome(self.outcome))
        layer = self.layer if self.layer is not None else (
            self.outcome.on_layer if self.outcome is not None else None)
        if layer is None:
            raise ConfigurationError("layer", None, "a conclusion needs an outcome or a layer "
                                     "value")
        object.__setattr__(self, "layer", LayerStatus(layer))
        object.__setattr__(self, "result", MappingProxyType(dict(self.result)))

    @property
    def needs_review(self) -> bool:
        """Whether the finished task goes into the review queue: skipped by the deployment's
        policy, or analysed under the confidence threshold (not a feature's photo list)."""
        return self.outcome is TaskOutcome.REVIEW or (
            self.outcome is TaskOutcome.SKIPPED and not self.result.get("expanded"))

    @property
    def payload(self) -> Mapping[str, Any]:
        """The task's submission as stored (feature and attachment GlobalIDs, layer, ...)."""
        return self.task.payload

    @property
    def submission(self) -> Submission:
        """The task's submission, typed (raises InvalidPayload for a payload that is none)."""
        submission = self.task.submission
        if submission is None:
            return Submission.from_payload(self.task.payload)
        return submission


class Sink(Protocol):
    """Writes a conclusion and completes its task (see the module docstring).

    A sink whose writes leave the ledger (the feature layer) sets ``fenced = True``: the
    processor then hands ``finish`` and ``flag`` a ``fence``, a callable to run just before
    each write leaves, which raises :class:`~fme_ai_resilience.core.errors.LeaseLost` when the
    task's lease is no longer this holder's (docs/pipeline.md, "Fenced to the layer").
    """

    name: str

    def finish(self, conclusion: Conclusion, *, store: Store, now: float) -> bool:
        """Write (unless already written) and complete; False when the lease was lost.

        Raises what the write raises (a :class:`~fme_ai_resilience.core.errors.ResilienceError`
        carrying an ``error_class``) for the processor to retry, park or bury.
        """

    def flag(self, conclusion: Conclusion, *, store: Store, now: float) -> None:
        """Write ``conclusion.layer`` (AWAITING_ANALYSIS, REVIEWED, FAILED) and its result's
        fields without finishing the task; idempotent. Raises what the write raises."""


def _complete(conclusion: Conclusion, *, store: Store, now: float) -> bool:
    task = conclusion.task
    assert conclusion.outcome is not None, "only a finished task completes"
    return store.complete(task.key, task.lease_token, conclusion.outcome,
                          dict(conclusion.result), now=now, review=conclusion.needs_review)


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

    def flag(self, conclusion: Conclusion, *, store: Store, now: float) -> None:
        """Hand the flag over like a conclusion (the feature carries the layer value)."""
        with self._lock:
            self._collected.append(conclusion)

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
        task = conclusion.task
        assert conclusion.outcome is not None, "only a finished task completes"
        return store.complete_with_asset(task.key, task.lease_token, conclusion.outcome,
                                         dict(conclusion.result), _asset_row(conclusion),
                                         now=now, review=conclusion.needs_review)

    def flag(self, conclusion: Conclusion, *, store: Store, now: float) -> None:
        """The task's ``asset_condition`` row with the layer value, the task left as it is."""
        store.put_asset(_asset_row(conclusion), now=now)


def _asset_row(conclusion: Conclusion) -> AssetRow:
    task, result = conclusion.task, conclusion.result
    submission = conclusion.submission
    confidence: Optional[float] = result.get("confidence")
    return AssetRow(task_key=task.key, feature_global_id=submission.feature_global_id,
                    outcome=conclusion.layer,   # type: ignore[arg-type]
                    attachment_global_id=submission.attachment_global_id,
                    asset_type=submission.asset_type, condition=result.get("condition"),
                    confidence=confidence, model_version=result.get("model_version"),
                    trace_id=task.trace_id)


def written(task: Task) -> bool:
    """Whether the task's conclusion was already written (only its completion is left)."""
    return task.done(Stage.WRITTEN)
