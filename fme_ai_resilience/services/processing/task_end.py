"""How one claimed task's run ends: the transitions its stages return, and what it reports.

A stage of :class:`~fme_ai_resilience.services.processing.task_run.TaskRun` returns its value or one of
these transitions; one method of the run writes the transition (the task's final row for
this run) and builds the :class:`TaskResult` (docs/pipeline.md)::

    Done    conclude: write back through the sink and complete (SUCCEEDED)
    Retry   FAILED, an attempt spent, due again at ``until``
    Wait    DEFERRED, no attempt spent, due again at ``until`` (behind an open circuit, held
            back by the ladder, the fleet at its concurrency limit, the photo's answer in
            flight under another lease); ``flag`` shows it on the layer as awaiting analysis
    Dead    DEAD with its failure class: flagged on the layer with its cause (or as awaiting
            analysis when the compensator requeues it), told through the notifications
    Lost    the lease was lost: the task is another holder's, nothing more is written
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Union

from ...core.errors import ErrorClass, FailureClass
from ...core.ledger import DeferCause, Status, TaskOutcome

__all__ = ["TaskResult", "Done", "Retry", "Wait", "Dead", "Lost", "End", "ENDS"]


@dataclass(frozen=True)
class TaskResult:
    """What became of one claimed task in a batch (the FME adapter emits one feature each).

    ``status`` is the task's status afterwards (SUCCEEDED, FAILED, DEFERRED, DEAD, or
    PROCESSING when the lease was lost); ``retry_at`` when a parked task is due again.
    """

    key: str
    status: Status
    trace_id: str
    outcome: Optional[TaskOutcome] = None
    condition: Optional[str] = None
    confidence: Optional[float] = None
    error_class: Optional[ErrorClass] = None
    failure_class: Optional[FailureClass] = None
    retry_at: Optional[float] = None
    reused: bool = False
    reason: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready: enums by value, unset fields left out."""
        out: Dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is None or value == "":
                continue
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out


@dataclass(frozen=True)
class Done:
    """The task is concluded: ``outcome`` and the ``result`` the sink writes and the ledger
    keeps."""

    outcome: TaskOutcome
    result: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Retry:
    """FAILED: ``attempts`` failed attempts of this run are spent; due again at ``until``."""

    until: float
    cause: ErrorClass
    detail: str
    attempts: int


@dataclass(frozen=True)
class Wait:
    """DEFERRED until ``until``, no attempt spent; ``cause`` the error class to report (None
    for a wait that is nobody's failure), ``defer_cause`` DEGRADED for a photo the ladder
    holds back, ``flag`` whether the layer is told the photo awaits analysis."""

    until: float
    reason: str
    cause: Optional[ErrorClass] = ErrorClass.CIRCUIT_OPEN
    defer_cause: Optional[DeferCause] = None
    flag: bool = False


@dataclass(frozen=True)
class Dead:
    """DEAD with ``failure_class``: no retry can help; ``cause`` the last error class."""

    failure_class: FailureClass
    detail: str
    cause: Optional[ErrorClass] = None


@dataclass(frozen=True)
class Lost:
    """The lease was lost (another holder has the task): nothing more is written."""

    reason: str


End = Union[Done, Retry, Wait, Dead, Lost]
#: Every transition type, for ``isinstance`` checks.
ENDS = (Done, Retry, Wait, Dead, Lost)
