"""The ledger's vocabulary: task statuses, outcomes and the values the store hands back.

One row of ``ai_task_registry`` per business fact (one photo of one submitted feature); see
docs/ledger.md for the state machine. The store (``fme_ai_resilience.store``)
implements the transitions; this module only names them.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple, Union

from .errors import ErrorClass, FailureClass, InvalidPayload
from .intake.submission import Submission

__all__ = ["Status", "TaskOutcome", "LayerStatus", "DeferCause", "ReviewState", "RegisterOutcome", "WhenDegraded", "OverloadMode", "Stage", "Registration",
           "Task", "TaskRecord", "ReapResult", "CallRecord", "CallWindow", "FormatAnomaly",
           "AssetRow", "Notification", "PruneResult", "CallSample", "CompletionSample",
           "RegistrationSample", "InvalidBodyKept", "Refusal", "PhotoCounts", "LedgerState", "ReviewItem",
           "ReviewVerdict", "INVALID_NOT_KEPT", "REFUSALS_NOT_RECORDED", "DELIVERED",
           "BAD_SIGNATURE", "SenderCount"]

#: The ``intake_counter`` row counting invalid bodies whose dead letter was not kept.
INVALID_NOT_KEPT = "invalid_not_kept"
#: The ``intake_counter`` row counting refusals past the refusal records' bound.
REFUSALS_NOT_RECORDED = "refusals_not_recorded"
#: What a webhook sender's ``intake_counter`` rows count (``sender:<sender>:<event>``): a
#: delivery the ledger kept, a delivery refused for its signature.
DELIVERED = "delivered"
BAD_SIGNATURE = "bad_signature"


class Status(str, enum.Enum):
    """Where a task is in its life (``ai_task_registry.status``)."""

    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DEFERRED = "DEFERRED"
    DEAD = "DEAD"

    @property
    def in_progress(self) -> bool:
        """Registered but not finished: a redelivery answers 202, not 200."""
        return self in (Status.PENDING, Status.PROCESSING, Status.FAILED, Status.DEFERRED)


class TaskOutcome(str, enum.Enum):
    """How a SUCCEEDED task ended. Only ACCEPTED and REVIEW mean analysed."""

    ACCEPTED = "ACCEPTED"   # analysed: the AI conclusion was written back
    REVIEW = "REVIEW"       # analysed, under the confidence threshold: a person confirms it
    SKIPPED = "SKIPPED"     # never analysed: skipped by the deployment's policy (manual
    #                         review), or a feature's photo list registered as its own tasks

    @property
    def analysed(self) -> bool:
        """Whether the photo got a validated Vision AI answer."""
        return self is not TaskOutcome.SKIPPED

    @property
    def on_layer(self) -> "LayerStatus":
        """What the write-back's outcome field shows for a task that ended so."""
        return LayerStatus.MANUAL_REVIEW if self is TaskOutcome.SKIPPED else LayerStatus(self.value)


class LayerStatus(str, enum.Enum):
    """What the write-back's outcome field (``writeback.outcome_field``) tells anyone looking at
    the layer. ACCEPTED and REVIEW are analysed (assessment fields filled); AWAITING_ANALYSIS
    is owed (analysis held back, the processor takes it as soon as it may); MANUAL_REVIEW was
    skipped by the deployment's own policy (never analysed: a person must look); REVIEWED holds
    a person's verdict from the review queue; FAILED is a dead letter no retry can help (the
    model field says ``failed:<cause>``, and people are told): a person must look."""

    ACCEPTED = "ACCEPTED"
    REVIEW = "REVIEW"
    AWAITING_ANALYSIS = "AWAITING_ANALYSIS"
    MANUAL_REVIEW = "MANUAL_REVIEW"
    REVIEWED = "REVIEWED"
    FAILED = "FAILED"

    @property
    def analysed(self) -> bool:
        """Whether the value says the Vision AI analysed the photo."""
        return self in (LayerStatus.ACCEPTED, LayerStatus.REVIEW)


class DeferCause(str, enum.Enum):
    """Why a DEFERRED task waits, when the reason matters beyond its due time."""

    DEGRADED = "degraded"   # held back by the degradation ladder: owed, not counted by it


class ReviewState(str, enum.Enum):
    """Where a task stands in the review queue (``ai_task_registry.review_state``)."""

    OPEN = "OPEN"           # a person must look: skipped by policy, or under the threshold
    RESOLVED = "RESOLVED"   # a reviewer's verdict is recorded


class RegisterOutcome(str, enum.Enum):
    """What ``Store.register`` decided, in one round trip."""

    NEW = "NEW"
    DUPLICATE_DONE = "DUPLICATE_DONE"
    DUPLICATE_IN_PROGRESS = "DUPLICATE_IN_PROGRESS"
    OVER_BACKLOG = "OVER_BACKLOG"   # reject mode: nothing stored, answer 429
    PARKED = "PARKED"               # park mode: stored as DEFERRED, answer 202


class InvalidBodyKept(str, enum.Enum):
    """What ``Store.keep_invalid_body`` did with the evidence of a body that is no submission."""

    KEPT = "KEPT"                   # a new DEAD row (INVALID_PAYLOAD)
    ALREADY_KEPT = "ALREADY_KEPT"   # the same body was kept before: nothing changed
    NOT_KEPT = "NOT_KEPT"           # past the bounds: nothing stored, only counted


class WhenDegraded(str, enum.Enum):
    """What a degradation level that holds analysis back does to a photo of an asset type the
    deployment names non-critical (``degrade.non_critical_types``)."""

    DEFER = "defer"   # keep it owed: analysed once the ladder allows (every other type too)
    SKIP = "skip"     # never analysed: SKIPPED for manual review, in the review queue


class OverloadMode(str, enum.Enum):
    """What intake does past the backlog watermark."""

    PARK = "park"
    REJECT = "reject"


class Stage(str, enum.Enum):
    """Checkpoints that make a task re-entrant: a finished stage is never redone."""

    DOWNLOADED = "downloaded"
    ANALYZED = "analyzed"
    WRITTEN = "written"


@dataclass(frozen=True)
class Registration:
    """The answer of ``Store.register``: the decision and what the row looked like.

    ``backlog`` is the number of due-or-running tasks the check saw, capped at the ceiling + 1
    (the check never counts the whole table).
    """

    key: str
    outcome: RegisterOutcome
    status: Optional[Status]
    task_outcome: Optional[TaskOutcome] = None
    backlog: int = 0


@dataclass(frozen=True)
class Task:
    """A claimed task: everything the processor needs, and the lease token to write with.

    ``submission`` is the payload read as the :class:`~fme_ai_resilience.core.intake.submission.
    Submission` it was registered from, once, where the task is built (None when the stored
    payload is no submission: the processor buries such a task).
    """

    key: str
    lease_token: int
    lease_expires_at: float
    attempt_count: int
    payload: Mapping[str, Any]
    trace_id: str
    source: str
    created_at: float
    checkpoints: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    failure_class: Optional[FailureClass] = None
    error_class: Optional[ErrorClass] = None
    requeue_count: int = 0
    layer_flag: Optional[LayerStatus] = None
    submission: Optional[Submission] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload", MappingProxyType(dict(self.payload)))
        object.__setattr__(self, "checkpoints", MappingProxyType(dict(self.checkpoints)))
        if self.submission is None:
            try:
                object.__setattr__(self, "submission", Submission.from_payload(self.payload))
            except InvalidPayload:
                pass

    def done(self, stage: Stage) -> bool:
        """Whether ``stage`` already has a checkpoint (do not redo it)."""
        return self.checkpoints.get(Stage(stage).value) is not None

    def checkpoint(self, stage: Stage) -> Any:
        """The data ``stage`` recorded (None when it has not finished)."""
        return self.checkpoints.get(Stage(stage).value)


@dataclass(frozen=True)
class TaskRecord:
    """A row of ``ai_task_registry`` as read for display, tests and reconciliation."""

    key: str
    status: Status
    attempt_count: int
    payload: Mapping[str, Any]
    trace_id: str
    source: str
    created_at: float
    updated_at: float
    outcome: Optional[TaskOutcome] = None
    failure_class: Optional[FailureClass] = None
    last_error: Optional[str] = None
    next_attempt_at: Optional[float] = None
    lease_owner: Optional[str] = None
    lease_expires_at: Optional[float] = None
    lease_token: int = 0
    checkpoints: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    result: Optional[Mapping[str, Any]] = None
    completed_at: Optional[float] = None
    error_class: Optional[ErrorClass] = None
    requeue_count: int = 0
    received_at: Optional[float] = None
    priority: int = 0
    defer_cause: Optional[DeferCause] = None
    layer_flag: Optional[LayerStatus] = None
    review_state: Optional[ReviewState] = None
    review_verdict: Optional[Mapping[str, Any]] = None
    review_written_at: Optional[float] = None


@dataclass(frozen=True)
class ReapResult:
    """What ``Store.reap_expired`` did: leases returned to PENDING, and tasks out of budget."""

    requeued: int
    buried: int


@dataclass(frozen=True)
class CallRecord:
    """One outbound call, for ``ai_call_log``: window statistics, golden signals, retry budget.

    ``error_class`` is None for a success. ``retry`` is True for any attempt after a task's
    first call to the service (the fleet-wide retry budget counts these against first calls).
    ``phases`` holds seconds per phase (``connect``, ``ttfb``, ``body``). ``down`` says the
    failure said the service is down (``fme_ai_resilience.core.resilience.blame.says_down``): a run of them
    opens the circuit, and a time-to-first-byte timeout without it is no failure of the
    breaker's window (slow is not down).
    """

    service: str
    started_at: float
    duration_s: float
    error_class: Optional[str] = None
    status_code: Optional[int] = None
    retry: bool = False
    trace_id: str = ""
    task_key: Optional[str] = None
    phases: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    down: bool = False

    @property
    def ok(self) -> bool:
        return self.error_class is None


@dataclass(frozen=True)
class CallWindow:
    """Aggregates of ``ai_call_log`` for one service since a point in time."""

    calls: int
    failures: int
    slow: int
    retries: int

    @property
    def first_attempts(self) -> int:
        return self.calls - self.retries

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0

    @property
    def slow_rate(self) -> float:
        return self.slow / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class FormatAnomaly:
    """A remote answer that failed validation, kept as evidence (``format_anomaly``)."""

    provider: str
    observed_at: float
    errors: tuple
    excerpt: str
    model_version: Optional[str] = None
    task_key: Optional[str] = None
    trace_id: str = ""


@dataclass(frozen=True)
class AssetRow:
    """One ``asset_condition`` row: the conclusion about one photo's asset, written in the same
    transaction as its task's completion (so the asset is never updated with the task left
    unfinished, nor the task finished with the asset not updated)."""

    task_key: str
    feature_global_id: str
    outcome: Union[TaskOutcome, "LayerStatus"]
    attachment_global_id: Optional[str] = None
    asset_type: Optional[str] = None
    condition: Optional[str] = None
    confidence: Optional[float] = None
    model_version: Optional[str] = None
    trace_id: str = ""

    @property
    def layer_value(self) -> str:
        """The outcome as the layer's outcome field shows it (MANUAL_REVIEW for SKIPPED)."""
        if isinstance(self.outcome, LayerStatus):
            return self.outcome.value
        return TaskOutcome(self.outcome).on_layer.value


@dataclass(frozen=True)
class Notification:
    """A ``notification`` row: something people must hear about (a photo that is gone, say),
    handed to FME's Emailer by the compensator's PythonCaller."""

    id: int
    kind: str
    task_key: Optional[str]
    subject: str
    body: str
    created_at: float


@dataclass(frozen=True)
class PruneResult:
    """What a retention pass removed: call-log rows and format anomalies."""

    calls: int
    anomalies: int


@dataclass(frozen=True)
class CallSample:
    """One ``ai_call_log`` row as the golden signals read it."""

    service: str
    started_at: float
    duration_s: float
    error_class: Optional[str]
    retry: bool


@dataclass(frozen=True)
class CompletionSample:
    """One finished task as the golden signals read it (``reused``: its analysis was reused;
    ``expanded``: a feature whose photo list was registered as their own tasks, no photo)."""

    created_at: float
    completed_at: float
    status: Status
    outcome: Optional[TaskOutcome]
    failure_class: Optional[FailureClass]
    reused: bool
    expanded: bool = False


@dataclass(frozen=True)
class RegistrationSample:
    """One registration as the golden signals read it (``received_at``: the webhook's arrival)."""

    created_at: float
    received_at: Optional[float]
    source: str


@dataclass(frozen=True)
class Refusal:
    """A delivery intake answered 429 or 503 without storing all its photos: what
    reconciliation needs to find the submission on the feature layer and register it (an
    ``intake_refusal`` row). Never a token.

    ``key`` is the body's key (``body:sha256:<hex>``): a redelivery of the same body lands on
    the same record, ``refusals`` counting the deliveries, ``refused_at`` the last one and
    ``first_refused_at`` the first. ``records`` holds the ``(layer_url, global_id)`` of every
    record (feature or repeat record) with a refused photo.
    """

    key: str
    reason: str
    status_code: int
    feature_global_id: str
    refused_at: float
    photos_refused: int
    photos_stored: int = 0
    service_url: Optional[str] = None
    layer_url: Optional[str] = None
    delivery_id: Optional[str] = None
    event_type: Optional[str] = None
    records: Tuple[Tuple[Optional[str], str], ...] = ()
    refusals: int = 1
    first_refused_at: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple((layer, gid) for layer, gid in self.records))
        if self.first_refused_at is None:
            object.__setattr__(self, "first_refused_at", self.refused_at)


@dataclass(frozen=True)
class PhotoCounts:
    """The ledger in the one honest vocabulary: ``analysed`` (SUCCEEDED, ACCEPTED or REVIEW),
    ``awaiting`` (owed: in progress, ``held_back`` of them by the degradation ladder),
    ``skipped`` (by the deployment's policy: never analysed), ``in_review`` (the review
    queue), ``reviewed`` (a person's verdict recorded), ``expanded`` (features whose photo list
    was registered as their own tasks) and ``dead`` by cause."""

    accepted: int = 0
    review: int = 0
    skipped: int = 0
    expanded: int = 0
    awaiting: int = 0
    held_back: int = 0
    in_review: int = 0
    reviewed: int = 0
    dead: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "dead", MappingProxyType(dict(self.dead)))

    @property
    def analysed(self) -> int:
        return self.accepted + self.review

    def as_dict(self) -> Mapping[str, Any]:
        return {"analysed": self.analysed, "accepted": self.accepted, "review": self.review,
                "awaiting_analysis": self.awaiting, "held_back": self.held_back,
                "in_review": self.in_review, "reviewed": self.reviewed,
                "skipped_by_policy": self.skipped, "expanded": self.expanded,
                "dead_by_cause": {k: v for k, v in self.dead.items() if v}}


@dataclass(frozen=True)
class ReviewVerdict:
    """A reviewer's verdict on a photo of the review queue: the condition they saw, who they
    are, a note, and when."""

    condition: str
    reviewer: str
    resolved_at: float
    note: str = ""

    def as_dict(self) -> Mapping[str, Any]:
        return {"condition": self.condition, "reviewer": self.reviewer, "note": self.note,
                "resolved_at": self.resolved_at}


@dataclass(frozen=True)
class ReviewItem:
    """One photo of the review queue: why it is there (``outcome``: SKIPPED by policy, or
    REVIEW under the threshold), the AI's answer if any, and the verdict once resolved."""

    key: str
    outcome: TaskOutcome
    since: float
    payload: Mapping[str, Any]
    trace_id: str
    result: Optional[Mapping[str, Any]] = None
    state: ReviewState = ReviewState.OPEN
    verdict: Optional[ReviewVerdict] = None
    written_at: Optional[float] = None


@dataclass(frozen=True)
class LedgerState:
    """What the ledger says about its work at ``observed_at``, for the signals that page.

    ``outcomes`` counts it in the honest vocabulary; ``due`` tasks are claimable now, the
    oldest due since ``oldest_due_at`` and registered at ``oldest_due_created_at``;
    ``last_progress_at`` is when an engine last finished a task; ``expired_leases`` are held
    by processors that stopped renewing (the oldest expired at ``oldest_expiry``); the review
    queue holds ``review_queue`` photos, the oldest since ``review_oldest_at``.
    """

    observed_at: float
    outcomes: PhotoCounts = field(default_factory=PhotoCounts)
    due: int = 0
    oldest_due_at: Optional[float] = None
    oldest_due_created_at: Optional[float] = None
    last_progress_at: Optional[float] = None
    expired_leases: int = 0
    oldest_expiry: Optional[float] = None
    review_queue: int = 0
    review_oldest_at: Optional[float] = None

    def age(self, since: Optional[float]) -> Optional[float]:
        """Seconds from ``since`` to ``observed_at`` (None for None)."""
        return None if since is None else max(0.0, self.observed_at - since)

    @property
    def stalled_for_s(self) -> Optional[float]:
        """How long due work has seen no engine finish anything (None: nothing due)."""
        if not self.due or self.oldest_due_at is None:
            return None
        since = max(self.oldest_due_at, self.last_progress_at or self.oldest_due_at)
        return max(0.0, self.observed_at - since)


@dataclass(frozen=True)
class SenderCount:
    """How many of one event a webhook sender caused (``DELIVERED``, ``BAD_SIGNATURE``), the
    first and the last (epoch seconds)."""

    sender: str
    event: str
    n: int
    first_at: float
    last_at: float
