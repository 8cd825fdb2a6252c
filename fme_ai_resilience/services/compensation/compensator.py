"""The compensator (WS-03): what keeps the ledger honest between processor runs.

:meth:`Compensator.run` takes these steps, each idempotent and bounded per run (safe to run from
several places at once, and again after a crash):

1. reap expired leases (a crashed engine's tasks go back to PENDING, or DEAD/``BUDGET`` once
   their attempt budget is spent);
2. requeue dead letters by cause: the attempt budget spent (``BUDGET``, a transient cause)
   automatically, the n-th time after ``requeue_backoff_s x 2**(n-1)``, up to
   ``requeue_budget`` times per task; ``FORMAT`` only when asked (after the schema is fixed);
   ``NOT_FOUND`` never: a notification instead, for FME's Emailer; ``CONFIGURATION`` (a
   write-back the layer refused for the deployment's setup, no photo host or layer
   configured) only when asked, after the fix,
   with a notification saying what to fix (its paid analysis is kept); every other dead
   letter a person must look at (``FORMAT``, ``AUTH``, ``BAD_REQUEST``, and ``BUDGET`` once
   its requeues are spent) is told too, with its cause: nothing is ever silently gone;
3. evaluate the breakers and the degradation ladder (a cooldown over, a silent probe round,
   the signals the ladder climbs and descends on), with nobody calling;
4. reconcile a window against the feature layer (gaps by day, asset type and crew; with
   backfill, missing photos registered PENDING with ``source=reconcile``);
5. prune the call log and format anomalies past retention, and the call slots whose time ran
   out (an engine that died left them).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ...core.resilience.breaker import BreakerState
from ...core.clock import Clock, SystemClock
from ...core.resilience.degrade import LadderState
from ...core.errors import ConfigurationError, FailureClass
from ...core.ledger import Notification, PruneResult, ReapResult, TaskRecord
from ...core.config.settings import Settings
from ...store.base import Store
from .reconcile import Layer, ReconcileReport, Reconciler
from ..resilience.breaker import CircuitBreaker
from ..resilience.degrade import Degradation, gather_signals

__all__ = ["Compensator", "CompensationReport", "requeue_delay_s", "NOT_FOUND_KIND",
           "CONFIGURATION_KIND", "FAILED_KIND"]

log = logging.getLogger("fme_ai_resilience.compensator")

#: The notification kind of a photo the layer no longer has.
NOT_FOUND_KIND = "photo-not-found"
#: The notification kind of a task the deployment's setup stopped (a refused write-back, no
#: photo host or layer configured); the name is kept from when only write-backs were.
CONFIGURATION_KIND = "writeback-configuration"
#: The notification kind of any other dead letter a person must look at.
FAILED_KIND = "analysis-failed"
#: Why each of those dead letters failed, in the crew's words.
_FAILED_SAYS = {
    FailureClass.FORMAT: "was answered out of schema by the Vision AI (format anomalies hold "
                         "the answers)",
    FailureClass.AUTH: "could not be analysed: a credential was refused",
    FailureClass.BAD_REQUEST: "could not be analysed: the request was refused as bad",
    FailureClass.BUDGET: "could not be analysed within its attempt budget, requeues included",
}


def requeue_delay_s(requeue_count: int, base_s: float, cap_s: float) -> float:
    """The wait before the (``requeue_count`` + 1)-th automatic requeue: doubling, capped."""
    return min(cap_s, base_s * 2.0 ** min(max(requeue_count, 0), 62))


@dataclass(frozen=True)
class CompensationReport:
    """What one run did."""

    reaped: ReapResult
    requeued: Dict[str, int]
    notified: int
    breakers: Dict[str, BreakerState]
    ladder: LadderState
    pruned: PruneResult
    reconciled: Optional[ReconcileReport] = None
    notifications: Tuple[Notification, ...] = field(default=())

    def summary(self) -> str:
        """One line per step, as ``compensate`` prints it."""
        d = self.as_dict()
        lines = [f"reaped: {d['reaped']['requeued']} requeued, {d['reaped']['buried']} buried",
                 "requeued: " + (", ".join(f"{n} {c}" for c, n in self.requeued.items())
                                 or "none"),
                 f"notified: {self.notified} dead letter(s) people must hear of",
                 "breakers: " + (", ".join(f"{s} {v}" for s, v in d["breakers"].items())
                                 or "none"),
                 f"ladder: {d['ladder']}",
                 f"pruned: {self.pruned.calls} call(s), {self.pruned.anomalies} anomaly(ies)"]
        r = self.reconciled
        lines.append("reconciled: not run" if r is None else
                     f"reconciled: {r.expected} expected, {len(r.missing)} missing, "
                     f"{r.backfilled} backfilled")
        return "\n".join(lines)

    def as_dict(self) -> Dict[str, object]:
        """A JSON-ready form (``compensate --json``, the WS-03 report feature)."""
        return {
            "reaped": {"requeued": self.reaped.requeued, "buried": self.reaped.buried},
            "requeued": dict(self.requeued), "notified": self.notified,
            "breakers": {s: b.state.value if b.mode.value == "AUTO" else b.mode.value
                         for s, b in self.breakers.items()},
            "ladder": self.ladder.effective.label,
            "pruned": {"calls": self.pruned.calls, "anomalies": self.pruned.anomalies},
            "reconciled": None if self.reconciled is None else self.reconciled.as_dict(),
            "notifications": [{"id": n.id, "kind": n.kind, "task_key": n.task_key,
                               "subject": n.subject} for n in self.notifications],
        }


class Compensator:
    """Runs WS-03 passes over the ledger (see the module docstring).

    ``services`` are the protected services to evaluate (default: the Vision service and its
    fallback, when one is configured); ``layer`` the feature layer to reconcile against (None:
    no reconciliation).
    """

    def __init__(self, settings: Settings, *, store: Store, layer: Optional[Layer] = None,
                 services: Optional[Sequence[str]] = None,
                 clock: Optional[Clock] = None) -> None:
        self.settings = settings
        self.store = store
        self.layer = layer
        self.clock = clock or SystemClock()
        vision = settings.vision
        names = list(services) if services is not None else (
            [vision.service] + ([vision.fallback_service] if vision.fallback_endpoint else []))
        self.breakers = [CircuitBreaker(name, settings.breaker, store=store, clock=self.clock)
                         for name in names]
        self.ladder = Degradation.from_settings(settings, store=store, clock=self.clock)

    def __repr__(self) -> str:
        return (f"Compensator(services={[b.service for b in self.breakers]}, "
                f"layer={getattr(self.layer, 'url', None)!r})")

    def run(self, *, requeue_format: bool = False, reconcile: bool = True,
            backfill: Optional[bool] = None) -> CompensationReport:
        """One pass of every step; ``requeue_format`` also requeues FORMAT dead letters (after
        a schema fix); ``backfill`` overrides ``compensation.reconcile_backfill``."""
        comp = self.settings.compensation
        reaped = self.store.reap_expired(self.settings.retry.task_attempts,
                                         now=self.clock.now())
        requeued = {FailureClass.BUDGET.value: self._requeue(FailureClass.BUDGET,
                                                             comp.requeue_budget)}
        if requeue_format:
            requeued[FailureClass.FORMAT.value] = self.store.requeue(
                failure_class=FailureClass.FORMAT, now=self.clock.now())
        notified = (self._notify_missing_photos() + self._notify_configuration()
                    + self._notify_failed())
        breakers = {b.service: b.evaluate() for b in self.breakers}
        ladder = self._evaluate_ladder()
        reconciled = None
        if reconcile and self.layer is not None:
            now = self.clock.now()
            reconciled = self.reconcile(
                since=now - comp.reconcile_window_s, until=now,
                backfill=comp.reconcile_backfill if backfill is None else backfill)
        now = self.clock.now()
        cut = now - comp.retention_days * 86400.0
        pruned = self.store.prune(cut, cut)
        self.store.prune_slots(now=now)     # calls in flight an engine that died left
        report = CompensationReport(reaped, requeued, notified, breakers, ladder, pruned,
                                    reconciled, tuple(self.store.pending_notifications()))
        log.info("compensation: reaped %d (buried %d), requeued %s, notified %d, ladder %s, "
                 "pruned %d calls and %d anomalies", reaped.requeued, reaped.buried, requeued,
                 notified, ladder.effective.label, pruned.calls, pruned.anomalies)
        return report

    def _requeue(self, failure_class: FailureClass, budget: int) -> int:
        comp = self.settings.compensation
        moved = 0
        for key, count in self.store.requeue_candidates(failure_class, budget, comp.batch):
            now = self.clock.now()
            due = now + requeue_delay_s(count, comp.requeue_backoff_s, comp.requeue_backoff_cap_s)
            if self.store.requeue_later(key, count, due, now=now):
                moved += 1
        return moved

    def _notify_missing_photos(self) -> int:
        return self._notify(FailureClass.NOT_FOUND, NOT_FOUND_KIND, "Survey123 photo not found",
                            "is no longer on the layer: {error}. It is not retried; re-attach "
                            "the photo in Survey123 or close the task.")

    def _notify_configuration(self) -> int:
        return self._notify(
            FailureClass.CONFIGURATION, CONFIGURATION_KIND,
            "AI task stopped by the deployment's setup",
            "was stopped by the deployment's setup (a write-back the layer refused, or no "
            "photo host or layer configured): {error}. Once the layer or the settings are "
            "fixed, run `fme-ai-resilience dlq requeue --cause CONFIGURATION`; a Vision AI "
            "answer already paid for is kept, and that photo is written back, not analysed "
            "again.")

    def _notify_failed(self) -> int:
        """Every other dead letter of a photo a person must look at, with its cause (the
        layer says FAILED for it): a BUDGET one only once its automatic requeues are spent."""
        budget = self.settings.compensation.requeue_budget
        return sum(self._notify(
            failure_class, FAILED_KIND, f"AI analysis failed ({failure_class.value})",
            says + ": {error}. The layer shows it as FAILED; once the cause is fixed, run "
            f"`fme-ai-resilience dlq requeue --cause {failure_class.value}`.",
            keep=(lambda record: record.requeue_count >= budget)
            if failure_class is FailureClass.BUDGET else None)
            for failure_class, says in _FAILED_SAYS.items())

    def _notify(self, failure_class: FailureClass, kind: str, subject: str, says: str,
                keep: Optional[Callable[[TaskRecord], bool]] = None) -> int:
        """One notification per dead letter of ``failure_class`` (those ``keep`` keeps):
        ``says`` (with ``{error}`` the task's last error) follows the photo's task, feature
        and trace."""
        sent = 0
        for record in self.store.dead_letter_records(failure_class,
                                                     limit=self.settings.compensation.batch):
            if keep is not None and not keep(record):
                continue
            feature = record.payload.get("feature_global_id") or "?"
            body = (f"The photo of task {record.key} (feature {feature}, trace "
                    f"{record.trace_id}) " + says.format(error=record.last_error or ""))
            if self.store.notify(kind, subject, body, record.key, now=self.clock.now()):
                sent += 1
        return sent

    def _evaluate_ladder(self) -> LadderState:
        if not self.breakers:
            return self.ladder.state(fresh=True)
        primary = self.breakers[0]
        fallback = self.breakers[1] if len(self.breakers) > 1 else None
        signals = gather_signals(self.settings.intake, primary, fallback, store=self.store,
                                 now=self.clock.now())
        return self.ladder.observe(signals)

    def reconcile(self, *, since: float, until: float, backfill: bool = False
                  ) -> ReconcileReport:
        """Reconcile ``[since, until)`` (epoch seconds) against the layer."""
        if self.layer is None:
            raise ConfigurationError("writeback.layer_url", "", "reconciliation needs a layer")
        return Reconciler(self.layer, self.settings, store=self.store).run(
            since=since, until=until, backfill=backfill, now=self.clock.now())

    def take_notifications(self, limit: int = 100) -> List[Notification]:
        """Pending notifications, marked handed over (for the WS-03 PythonCaller's Emailer)."""
        pending = self.store.pending_notifications(limit)
        self.store.mark_notified([n.id for n in pending], now=self.clock.now())
        return pending
