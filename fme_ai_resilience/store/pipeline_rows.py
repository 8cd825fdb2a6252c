"""The rows the processor and the compensator keep beside the tasks, for every SQL backend.

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`: the analysis cache (one
validated AI result per photo content and model configuration, so no photo is paid for twice),
notifications for people, retention, dead-letter listing and requeueing with a budget, the
reconciler's key lookup, and the reads the golden signals are computed from. Each operation is
one statement through the backend's ``_statement``; the SQL is in ``sql/queries*.sql``.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..core.checks import count, finite, name
from ..core.errors import FailureClass
from ..core.ledger import (CallSample, CompletionSample, Notification, PruneResult,
                           RegistrationSample, Status, TaskOutcome, TaskRecord)
from .rows import from_json, optional, record_of, to_json

__all__ = ["PipelineRowOps", "SAMPLE_LIMIT"]

#: The most rows one golden-signal read returns (newest first): enough for a P95 over any
#: window an operator looks at, bounded on a ledger of any size.
SAMPLE_LIMIT = 20_000


class PipelineRowOps:
    """Analysis cache, notifications, retention, dead letters, reconciliation and signal reads.

    Mixed into a store that supplies ``_statement`` and ``_transact``.
    """

    _statement: Any
    _transact: Any

    # -- the analysis cache --------------------------------------------------------------------
    def cached_analysis(self, fingerprint: str) -> Optional[Dict[str, Any]]:
        """The validated result remembered for ``fingerprint``, or None."""
        rows = self._statement("analysis_get", {"fingerprint": name("fingerprint", fingerprint)},
                               write=False).rows
        return from_json(rows[0]["result"]) if rows else None

    def remember_analysis(self, fingerprint: str, result: Mapping[str, Any], *,
                          now: float) -> bool:
        """Keep ``result`` for ``fingerprint``; False when one was already kept (it stays).

        Sent again on a new connection when its own was lost mid-statement (keeping the first
        is the same done twice), so a paid answer is not lost with a dropped backend."""
        return self._statement("analysis_put", {
            "fingerprint": name("fingerprint", fingerprint),
            "result": to_json(dict(result), "result"), "now": finite("now", now)},
            idempotent=True).rowcount == 1

    def claim_analysis(self, fingerprint: str, key: str, until: float, *, token: int,
                       now: float) -> bool:
        """Whether the lease ``token`` of task ``key`` may call the Vision AI for
        ``fingerprint`` now: True when it holds the claim (new, its own, or one past its
        time), False while another lease's claim runs until its time (another task's, or an
        earlier holder of this task whose call may still be in flight). One statement."""
        return bool(self._statement("analysis_claim", {
            "fingerprint": name("fingerprint", fingerprint), "key": name("task_key", key),
            "token": count("token", token), "until": finite("until", until),
            "now": finite("now", now)}, idempotent=True).rows)

    def release_analysis(self, fingerprint: str, key: str, *, token: int) -> None:
        """Give up the claim of lease ``token`` of task ``key`` on ``fingerprint`` (it parked
        without an answer); another lease's claim is left alone."""
        self._statement("analysis_release", {"fingerprint": name("fingerprint", fingerprint),
                                             "key": name("task_key", key),
                                             "token": count("token", token)}, idempotent=True)

    def note_analysis_reused(self, fingerprint: str, *, now: float) -> None:
        """Count one reuse of the result kept for ``fingerprint``."""
        self._statement("analysis_reused", {"fingerprint": name("fingerprint", fingerprint),
                                            "now": finite("now", now)})

    # -- asset conditions ----------------------------------------------------------------------
    def asset_condition(self, task_key: str) -> Optional[Dict[str, Any]]:
        """The ``asset_condition`` row of one task as a dict, or None."""
        rows = self._statement("asset_get", {"key": name("task_key", task_key)},
                               write=False).rows
        return dict(rows[0]) if rows else None

    # -- notifications -------------------------------------------------------------------------
    def notify(self, kind: str, subject: str, body: str, task_key: Optional[str] = None, *,
               now: float) -> bool:
        """Queue a notification; False when one of this kind for this task exists already."""
        return self._statement("notify", {
            "kind": name("kind", kind), "key": task_key, "subject": name("subject", subject),
            "body": str(body), "now": finite("now", now)}).rowcount == 1

    def pending_notifications(self, limit: int = 100) -> List[Notification]:
        """Notifications not handed over yet, oldest first."""
        rows = self._statement("notifications_pending",
                               {"limit": count("limit", limit, minimum=1)}, write=False).rows
        return [Notification(id=int(r["id"]), kind=r["kind"], task_key=r["task_key"],
                             subject=r["subject"], body=r["body"],
                             created_at=float(r["created_at"])) for r in rows]

    def mark_notified(self, ids: Iterable[int], *, now: float) -> int:
        """Mark notifications handed over; returns how many were still pending."""
        now = finite("now", now)

        def work(tx: Any) -> int:
            return sum(tx.run("notification_sent", {"id": count("id", i), "now": now}).rowcount
                       for i in dict.fromkeys(ids))

        return self._transact(work)

    def unmark_notified(self, ids: Iterable[int], *, sent_at: float) -> int:
        """Give back notifications marked handed over at ``sent_at`` (by
        :meth:`mark_notified` with that ``now``) that did not reach their reader: they wait
        again. Returns how many were given back."""
        sent_at = finite("sent_at", sent_at)

        def work(tx: Any) -> int:
            return sum(tx.run("notification_given_back",
                              {"id": count("id", i), "sent_at": sent_at}).rowcount
                       for i in dict.fromkeys(ids))

        return self._transact(work)

    # -- retention -----------------------------------------------------------------------------
    def prune(self, calls_before: float, anomalies_before: float) -> PruneResult:
        """Delete call-log rows started and format anomalies observed before the given times."""
        calls = self._statement("prune_calls", {"before": finite("calls_before", calls_before)})
        anomalies = self._statement("prune_anomalies",
                                    {"before": finite("anomalies_before", anomalies_before)})
        self._statement("prune_claims", {"before": finite("calls_before", calls_before)})
        return PruneResult(calls=calls.rowcount, anomalies=anomalies.rowcount)

    # -- dead letters ----------------------------------------------------------------------------
    def dead_letter_records(self, failure_class: Optional[FailureClass] = None,
                            limit: int = 50, offset: int = 0) -> List[TaskRecord]:
        """Dead letters, newest first (of one failure class when given)."""
        klass = None if failure_class is None else FailureClass(failure_class).value
        rows = self._statement("dead_letter_rows", {
            "failure_class": klass, "any_class": klass is None,
            "limit": count("limit", limit, minimum=1), "offset": count("offset", offset)},
            write=False).rows
        return [record_of(r) for r in rows]

    def requeue_candidates(self, failure_class: FailureClass, max_requeues: int,
                           limit: int) -> List[Tuple[str, int]]:
        """``(key, requeue_count)`` of dead letters of ``failure_class`` whose requeue budget
        (``max_requeues``) is not spent, oldest first, at most ``limit``."""
        rows = self._statement("requeue_candidates", {
            "failure_class": FailureClass(failure_class).value,
            "max_requeues": count("max_requeues", max_requeues),
            "limit": count("limit", limit, minimum=1)}, write=False).rows
        return [(r["task_key"], int(r["requeue_count"])) for r in rows]

    def requeue_later(self, key: str, requeue_count: int, due_at: float, *,
                      now: float) -> bool:
        """One dead letter back to PENDING, due at ``due_at``, spending one requeue; False when
        it moved meanwhile (``requeue_count`` is the value the caller read: compare-and-set)."""
        return self._statement("requeue_later", {
            "key": name("key", key), "requeue_count": count("requeue_count", requeue_count),
            "due_at": finite("due_at", due_at), "now": finite("now", now)}).rowcount == 1

    # -- reconciliation ------------------------------------------------------------------------
    def existing_keys(self, keys: Sequence[str]) -> Set[str]:
        """Which of ``keys`` the ledger holds (any status)."""
        wanted = [name("keys[]", k) for k in keys]
        if not wanted:
            return set()
        rows = self._statement("existing_keys", {"keys": json.dumps(wanted)}, write=False).rows
        return {r["task_key"] for r in rows}

    # -- what the golden signals read ------------------------------------------------------------
    def call_samples(self, since: float, limit: int = SAMPLE_LIMIT) -> List[CallSample]:
        """Outbound calls (every service) started at or after ``since``, newest first."""
        rows = self._statement("calls_since", {"since": finite("since", since),
                                               "limit": count("limit", limit, minimum=1)},
                               write=False).rows
        return [CallSample(service=r["service"], started_at=float(r["started_at"]),
                           duration_s=float(r["duration_s"]), error_class=r["error_class"],
                           retry=bool(r["retry"])) for r in rows]

    def completion_samples(self, since: float,
                           limit: int = SAMPLE_LIMIT) -> List[CompletionSample]:
        """Tasks finished (SUCCEEDED or DEAD) at or after ``since``, newest first."""
        rows = self._statement("completed_since_rows", {
            "since": finite("since", since), "limit": count("limit", limit, minimum=1)},
            write=False).rows
        return [CompletionSample(created_at=float(r["created_at"]),
                                 completed_at=float(r["completed_at"]),
                                 status=Status(r["status"]),
                                 outcome=optional(TaskOutcome, r["outcome"]),
                                 failure_class=optional(FailureClass, r["failure_class"]),
                                 reused=bool(r["reused"]),
                                 expanded=r["outcome"] == TaskOutcome.SKIPPED.value
                                 and r["review_state"] is None) for r in rows]

    def registration_samples(self, since: float,
                             limit: int = SAMPLE_LIMIT) -> List[RegistrationSample]:
        """Tasks registered at or after ``since`` with the arrival of their webhook, newest
        first."""
        rows = self._statement("registered_since", {
            "since": finite("since", since), "limit": count("limit", limit, minimum=1)},
            write=False).rows
        return [RegistrationSample(created_at=float(r["created_at"]),
                                   received_at=None if r["received_at"] is None
                                   else float(r["received_at"]), source=r["source"])
                for r in rows]

    def anomalies_since(self, since: float) -> int:
        """How many format anomalies were observed at or after ``since``."""
        rows = self._statement("anomalies_since", {"since": finite("since", since)},
                               write=False).rows
        return int(rows[0]["n"])
