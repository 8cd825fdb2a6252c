"""The ``Store`` protocol: every ledger operation, each one atomic, ``now`` always passed in.

Two implementations (SQLite, PostgreSQL) satisfy it and are held to one contract test suite.
Token-carrying writes return whether they took effect: a stale lease token changes nothing
(a zombie engine cannot overwrite its successor's work).
"""
from __future__ import annotations

from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence,
                    Set, Tuple)

from ..core.resilience.breaker import BreakerState
from ..core.resilience.concurrency import ConcurrencySettings, LimitState
from ..core.resilience.degrade import LadderState
from ..core.observe.totals import LedgerMetrics
from ..core.errors import ErrorClass, FailureClass
from ..core.ledger import (AssetRow, CallRecord, CallSample, CompletionSample, Notification,
                           PruneResult, RegistrationSample, CallWindow, InvalidBodyKept,
                           DeferCause, FormatAnomaly, LayerStatus, LedgerState, PhotoCounts,
                           ReviewItem, ReviewState, ReviewVerdict, OverloadMode, ReapResult,
                           SenderCount,
                           Refusal, Registration, Stage, Task, TaskOutcome, TaskRecord)
from ..core.intake.submission import Submission

__all__ = ["Store"]


class Store(Protocol):
    """The ledger: idempotency registry, task queue, dead-letter queue and water gauge."""

    dialect: str

    def init_schema(self, *, now: float) -> List[int]:
        """Create or upgrade the tables (idempotent); returns the migrations applied."""

    def schema_version(self) -> int:
        """The highest applied migration (0: never initialised)."""

    def clear(self) -> None:
        """Delete every row of every ledger table (tests and drills)."""

    def close(self) -> None:
        """Release connections."""

    def describe(self) -> str:
        """Which database this is (dialect, host, port, database, user; or the file), for
        messages: never a password."""

    # -- intake ------------------------------------------------------------------------------
    def register(self, submission: Submission, backlog_ceiling: int,
                 overload_mode: OverloadMode = OverloadMode.PARK,
                 park_ceiling: Optional[int] = None, due_at: Optional[float] = None, *,
                 now: float, received_at: Optional[float] = None,
                 priority: int = 0) -> Registration:
        """Insert-or-report-existing plus the backlog check, in one round trip.

        Past ``backlog_ceiling`` due-or-running tasks: ``REJECT`` stores nothing and returns
        OVER_BACKLOG; ``PARK`` stores the row DEFERRED (PARKED) up to ``park_ceiling`` (None:
        no limit), past which it too returns OVER_BACKLOG. A duplicate key is reported whatever
        the backlog. ``due_at`` (default ``now``) is when the new task becomes claimable;
        ``received_at`` when the webhook that carried it arrived (the intake latency signal);
        ``priority`` orders claims (1: a critical asset type, claimed first).
        """

    def record_dead_letter(self, key: str, payload: Mapping[str, Any],
                           failure_class: FailureClass, error: str, *, now: float,
                           trace_id: str = "", source: str = "survey123") -> bool:
        """Store a DEAD row for something that never became a task (e.g. an invalid body).

        Returns False when ``key`` already exists (the evidence is kept once).
        """

    def keep_invalid_body(self, key: str, payload: Mapping[str, Any], error: str, *,
                          now: float, per_minute: int, limit: int,
                          trace_id: str = "") -> InvalidBodyKept:
        """Keep the dead letter (INVALID_PAYLOAD) of a body that is no submission, at most
        ``per_minute`` in the last 60 s and ``limit`` in all; past either, store nothing and
        count it (``invalid_not_kept``). ALREADY_KEPT when ``key`` exists."""

    def record_refusal(self, refusal: Refusal, *, limit: int) -> bool:
        """Keep the record of a delivery refused 429/503, at most ``limit`` records; a body
        already recorded counts the delivery on its record. False past the limit (counted as
        ``refusals_not_recorded``)."""

    def refusals(self, since: float, limit: int = 1000) -> List[Refusal]:
        """Refusal records whose last delivery is at or after ``since``, newest first."""

    def refusal_counts(self) -> Dict[str, Dict[str, int]]:
        """``{reason: {"bodies": n, "deliveries": n}}`` over the refusal records."""

    def intake_counters(self) -> Dict[str, int]:
        """What intake could not keep, by name (``invalid_not_kept``,
        ``refusals_not_recorded``)."""

    def record_sender(self, sender: str, event: str, *, now: float) -> None:
        """Count one ``event`` (``DELIVERED``, ``BAD_SIGNATURE``) of a webhook sender."""

    def sender_counts(self) -> List[SenderCount]:
        """Every webhook sender's counts, by sender and event."""

    # -- processing --------------------------------------------------------------------------
    def claim(self, owner: str, limit: int, lease_s: float, *, now: float) -> List[Task]:
        """Lease up to ``limit`` due tasks (PENDING, or FAILED/DEFERRED whose time has come),
        the highest priority first, then the longest due."""

    def checkpoint(self, key: str, token: int, stage: Stage, data: Any, *, now: float) -> bool:
        """Record that ``stage`` finished, with its data (JSON-ready)."""

    def complete(self, key: str, token: int, outcome: TaskOutcome,
                 result: Optional[Mapping[str, Any]], *, now: float,
                 review: bool = False) -> bool:
        """PROCESSING -> SUCCEEDED with the outcome and result (``review``: into the review
        queue)."""

    def fail(self, key: str, token: int, error_class: ErrorClass, error: str,
             retry_at: float, *, now: float, attempts: int = 1) -> bool:
        """PROCESSING -> FAILED, due again at ``retry_at``; adds ``attempts`` to the count."""

    def defer(self, key: str, token: int, until: float, *, now: float,
              cause: Optional[DeferCause] = None) -> bool:
        """PROCESSING -> DEFERRED until ``until`` without counting an attempt (``cause``
        DEGRADED: held back by the degradation ladder)."""

    def bury(self, key: str, token: int, failure_class: FailureClass, error: str, *,
             now: float) -> bool:
        """PROCESSING -> DEAD with a failure class (a dead letter)."""

    def renew(self, key: str, token: int, lease_s: float, *, now: float) -> bool:
        """Extend a live lease to ``now + lease_s``; False when the lease was lost."""

    def complete_with_asset(self, key: str, token: int, outcome: TaskOutcome,
                            result: Optional[Mapping[str, Any]], asset: AssetRow, *,
                            now: float, review: bool = False) -> bool:
        """:meth:`complete` and the task's ``asset_condition`` row in one transaction."""

    def flag_layer(self, key: str, token: int, flag: LayerStatus, *, now: float) -> bool:
        """Remember the interim value written on the layer for a task still owed (fenced)."""

    def put_asset(self, asset: AssetRow, *, now: float) -> None:
        """Write a task's ``asset_condition`` row without touching the task (idempotent)."""

    def release_held(self, *, now: float) -> int:
        """Make every photo the degradation ladder holds back due at ``now``; how many."""

    # -- compensation ------------------------------------------------------------------------
    def reap_expired(self, max_attempts: int, *, now: float) -> ReapResult:
        """Return expired leases to PENDING, counting an attempt; past the budget -> DEAD/BUDGET."""

    def requeue(self, keys: Optional[Iterable[str]] = None,
                failure_class: Optional[FailureClass] = None, force: bool = False, *,
                now: float) -> int:
        """DEAD -> PENDING for the given keys or failure class, as a fresh task; returns how many.

        Attempts, error and lease are reset; evidence (INVALID_PAYLOAD, UNKNOWN_SERVICE)
        moves only with ``force``.
        """

    # -- reading -----------------------------------------------------------------------------
    def get(self, key: str) -> Optional[TaskRecord]:
        """One row, or None."""

    def counts(self) -> Dict[str, int]:
        """``{status: n}`` with all six statuses present."""

    def backlog(self, limit: Optional[int] = None) -> int:
        """Tasks in progress (PENDING, PROCESSING, FAILED, DEFERRED), at most ``limit``.

        Counted through the in-progress index alone (finished rows are never read), and never
        past ``limit`` entries when one is given (None: count them all).
        """

    def ladder_backlog(self, limit: Optional[int] = None) -> int:
        """In-progress tasks without those the degradation ladder holds back, at most
        ``limit``: the backlog the ladder climbs on."""

    def outcome_counts(self) -> PhotoCounts:
        """The ledger in the one honest vocabulary: analysed, awaiting analysis (held back),
        skipped by policy, in review, reviewed, expanded, dead by cause."""

    def ledger_state(self, *, now: float) -> LedgerState:
        """The ledger's work at ``now`` for the signals that page: the honest counts, due
        work and the last progress, leases nobody renewed, the review queue."""

    def ledger_metrics(self, *, now: float) -> LedgerMetrics:
        """Every counter and histogram the ledger keeps (monotonic: kept by triggers in the
        event's transaction), its circuits and its ladder, observed at ``now``; writes nothing."""

    def review_stats(self) -> Tuple[int, Optional[float]]:
        """The review queue's size and when its oldest photo entered it (None: empty)."""

    def review_items(self, state: ReviewState = ReviewState.OPEN, limit: int = 50,
                     offset: int = 0) -> List[ReviewItem]:
        """Photos of the review queue in ``state``, oldest first."""

    def review_item(self, key: str) -> Optional[ReviewItem]:
        """One photo of the review queue (open or resolved), or None."""

    def resolve_review(self, key: str, verdict: ReviewVerdict, *, now: float,
                       write_s: float = ...) -> bool:
        """Record a reviewer's verdict on an open photo, once, holding its write-back for
        ``write_s``; False when it is not open."""

    def claim_review_write(self, key: str, *, now: float, write_s: float = ...) -> bool:
        """Take over the write-back of a recorded verdict not written yet for ``write_s``;
        False while another process holds it."""

    def release_review_write(self, key: str) -> None:
        """Give up the write-back of a verdict that could not be written."""

    def review_written(self, key: str, *, now: float) -> bool:
        """Note that the verdict reached the layer; False when it had already."""

    def dead_letters(self) -> Dict[str, int]:
        """``{failure_class: n}`` over DEAD rows."""

    def completed_since(self, since: float) -> int:
        """Tasks an engine took to SUCCEEDED or DEAD at or after ``since`` (the measured
        drain): dead letters of bodies that never became tasks are not counted."""

    # -- call log, anomalies, config -----------------------------------------------------------
    def record_call(self, call: CallRecord) -> None:
        """Append one outbound call to ``ai_call_log``."""

    def call_window(self, service: str, since: float, slow_s: float) -> CallWindow:
        """Calls, failures, slow calls (duration >= ``slow_s``) and retries since ``since``."""

    def record_anomaly(self, anomaly: FormatAnomaly) -> None:
        """Append one ``format_anomaly`` row."""

    def recent_anomalies(self, since: float, limit: int = 100) -> List[FormatAnomaly]:
        """Format anomalies observed at or after ``since``, newest first."""

    # -- analysis cache, notifications, retention, reconciliation, signals ----------------------
    def cached_analysis(self, fingerprint: str) -> Optional[Dict[str, Any]]:
        """The validated result remembered for a photo content and model configuration."""

    def remember_analysis(self, fingerprint: str, result: Mapping[str, Any], *,
                          now: float) -> bool:
        """Keep a validated result; False when one was kept already (the first stays)."""

    def claim_analysis(self, fingerprint: str, key: str, until: float, *, token: int,
                       now: float) -> bool:
        """Whether lease ``token`` of task ``key`` may call for ``fingerprint`` now (it holds
        the claim until ``until``); False while another lease's live claim runs."""

    def release_analysis(self, fingerprint: str, key: str, *, token: int) -> None:
        """Give up lease ``token`` of task ``key``'s claim on ``fingerprint``."""

    def note_analysis_reused(self, fingerprint: str, *, now: float) -> None:
        """Count one reuse of a remembered result."""

    def asset_condition(self, task_key: str) -> Optional[Dict[str, Any]]:
        """The ``asset_condition`` row of one task, or None."""

    def notify(self, kind: str, subject: str, body: str, task_key: Optional[str] = None, *,
               now: float) -> bool:
        """Queue a notification for people; kept once per kind and task."""

    def pending_notifications(self, limit: int = 100) -> List[Notification]:
        """Notifications not handed over yet, oldest first."""

    def mark_notified(self, ids: Iterable[int], *, now: float) -> int:
        """Mark notifications handed over; returns how many were pending."""

    def unmark_notified(self, ids: Iterable[int], *, sent_at: float) -> int:
        """Give back notifications marked handed over at ``sent_at`` that did not reach
        their reader, so they wait again; returns how many were given back."""

    def prune(self, calls_before: float, anomalies_before: float) -> PruneResult:
        """Delete call-log rows and format anomalies older than the given times."""

    def dead_letter_records(self, failure_class: Optional[FailureClass] = None,
                            limit: int = 50, offset: int = 0) -> List[TaskRecord]:
        """Dead letters, newest first."""

    def requeue_candidates(self, failure_class: FailureClass, max_requeues: int,
                           limit: int) -> List[Tuple[str, int]]:
        """``(key, requeue_count)`` of dead letters of a class with requeues left."""

    def requeue_later(self, key: str, requeue_count: int, due_at: float, *,
                      now: float) -> bool:
        """A dead letter back to PENDING at ``due_at``, spending one requeue (compare-and-set)."""

    def existing_keys(self, keys: Sequence[str]) -> Set[str]:
        """Which of ``keys`` the ledger holds."""

    def call_samples(self, since: float, limit: int = ...) -> List[CallSample]:
        """Outbound calls since a time, newest first."""

    def completion_samples(self, since: float, limit: int = ...) -> List[CompletionSample]:
        """Tasks finished since a time, newest first."""

    def registration_samples(self, since: float,
                             limit: int = ...) -> List[RegistrationSample]:
        """Tasks registered since a time, newest first."""

    def anomalies_since(self, since: float) -> int:
        """How many format anomalies were observed since a time."""

    def get_config(self) -> Dict[str, str]:
        """The ``resilience_config`` table as ``{name: value}`` (strings, as stored)."""

    def set_config(self, values: Mapping[str, str], *, now: float) -> None:
        """Upsert settings into ``resilience_config``."""

    # -- circuit breaker and degradation ladder -------------------------------------------------
    def breaker_get(self, service: str, *, now: float) -> BreakerState:
        """The service's ``circuit_state`` row; a missing row is created CLOSED (generation 0).

        Creating never touches an existing row: a process started while the circuit is open
        sees it open, with its original timestamps.
        """

    def breaker_peek(self, service: str) -> BreakerState:
        """The service's ``circuit_state`` row, or ``BreakerState()`` (CLOSED, generation 0)
        when there is none; a read only, it never creates the row."""

    def breaker_list(self) -> Dict[str, BreakerState]:
        """Every ``circuit_state`` row, by service."""

    def breaker_swap(self, service: str, expected_generation: int, new: BreakerState,
                     probe_slots: int = 0) -> bool:
        """Compare-and-set: write ``new`` only if the row is still at ``expected_generation``.

        With ``probe_slots`` > 0 (a move to HALF_OPEN) the new round's probe slots are created
        in the same transaction. Returns whether this call applied the change.
        """

    def breaker_claim_probe(self, service: str, generation: int, probe_timeout_s: float, *,
                            now: float) -> Optional[Tuple[int, int]]:
        """Atomically claim one half-open probe slot of round ``generation``: (slot, token).

        None when every slot is taken (or the round is over). A slot claimed but not reported
        within ``probe_timeout_s`` may be claimed again, with a new token.
        """

    def breaker_report_probe(self, service: str, generation: int, slot: int, token: int,
                             ok: bool, *, now: float) -> bool:
        """Record a probe's result; False if the claim was stale (timed out and re-claimed)."""

    def breaker_fail_silent_probes(self, service: str, generation: int,
                                   probe_timeout_s: float, *, now: float) -> int:
        """Mark claimed probes silent past ``probe_timeout_s`` as failed; returns how many."""

    def breaker_probe_tally(self, service: str, generation: int) -> Tuple[int, int]:
        """(successes, failures) reported in probe round ``generation``."""

    def pace_get(self, service: str) -> float:
        """The seconds between two calls of ``service`` (0: not paced)."""

    def recent_calls(self, service: str, limit: int) -> List[Tuple[Optional[str], Optional[str]]]:
        """``(error_class, task_key)`` of the service's latest ``limit`` calls, newest first."""

    def pace_claim(self, service: str, *, now: float,
                   latest: Optional[float] = None) -> Optional[Tuple[float, float]]:
        """Take the next call slot of a paced service: ``(slot_at, interval_s)``; None when the
        service is not paced. A slot starting after ``latest`` is shown, not taken."""

    def pace_next(self, service: str, *, now: float) -> Optional[Tuple[float, float]]:
        """A paced service's next free slot, ``(slot_at, interval_s)``, not taken; None when
        the service is not paced."""

    def pace_shown(self, service: str, *, since: float,
                   before: float) -> Optional[Tuple[float, int]]:
        """``(refused_at, taken)``: the service's latest 429 in ``[since, before)`` and the
        calls it took after it (logged, anything but a 429, or still in flight); None without
        a 429 in the range."""

    def pace_slow(self, service: str, interval_s: float, *, not_before: float) -> None:
        """Space the service's calls at least ``interval_s`` apart, none before ``not_before``."""

    def pace_relax(self, service: str, factor: float, floor_s: float) -> None:
        """A call went through: the interval times ``factor``; no pace below ``floor_s``."""

    def recent_retries(self, service: str,
                       limit: int) -> List[Tuple[Optional[str], Optional[str], bool]]:
        """``(error_class, task_key, retry)`` of the service's latest calls, newest first."""

    def down_streak(self, service: str, limit: int) -> Tuple[int, int]:
        """How many of the service's latest logged calls (at most ``limit``) said in a row
        that it is down, and about how many photos."""

    # -- the fleet's adaptive concurrency limit --------------------------------------------------
    def limit_read(self, service: str, settings: ConcurrencySettings, *,
                   now: float) -> Tuple[LimitState, int]:
        """The service's concurrency limit (its start when it has none) and the calls in
        flight at ``now``."""

    def limit_acquire(self, service: str, holder: str, settings: ConcurrencySettings,
                      until: float, *, now: float) -> Tuple[Optional[int], LimitState, int]:
        """Take a slot for one call (counted until ``until`` unless released) when the limit
        has room: ``(slot or None, state, calls in flight)``, atomically fleet-wide."""

    def limit_release(self, service: str, slot: Optional[int], settings: ConcurrencySettings,
                      update: Optional[Callable[[LimitState], LimitState]] = None, *,
                      hold_until: Optional[float] = None, now: float) -> LimitState:
        """End a call's slot (or hold it until ``hold_until``) and move the limit by
        ``update``, in one transaction; the limit after it."""

    def prune_slots(self, *, now: float) -> int:
        """Remove every call slot whose time has run out; how many."""

    def degrade_get(self, *, now: float) -> LadderState:
        """The fleet's degradation ladder row; created at L0 (generation 0) if missing."""

    def degrade_swap(self, expected_generation: int, new: LadderState) -> bool:
        """Compare-and-set the ladder row on its generation; returns whether it was applied."""
