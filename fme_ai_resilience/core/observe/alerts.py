"""The alerts that page an operator about the ledger's own work (pure).

:func:`ledger_alerts` reads a :class:`~fme_ai_resilience.core.ledger.LedgerState` and the window's
dead letters and raises:

* a stall (ALERT): work is due and no engine finished anything for longer than the latency
  promise (no processor running, every engine stuck); the message gives the oldest due task's
  age;
* overdue work (WARN): work is due, engines are finishing other work (critical asset types are
  claimed first), and the oldest due task was registered longer than the latency promise ago;
* dead letters (ALERT): more than ``alerts.dead_letter_ratio`` of the window's finished tasks
  (the evidence of bodies that never became tasks left out of both), or a cause seen for the
  first time (every dead letter of that cause is in the window);
* junk deliveries (WARN): :data:`JUNK_WARN_COUNT` or more bodies of one evidence cause
  (INVALID_PAYLOAD, UNKNOWN_SERVICE) in the window, a sender posting junk again and again;
  fewer are counted (``status``, ``/metrics``) and never page, so one stray POST does not hold
  ``check`` at WARN for the whole window;
* a processor that stopped renewing (WARN, ALERT past the latency promise): leases expired
  and not renewed, which the compensator's reaper hands back;
* the review queue (WARN): its oldest photo waiting longer than ``alerts.review_age_s``.

:func:`sender_alerts` reads the webhook senders' counts (ArcGIS layer webhooks) and warns:

* a silent sender (WARN): a sender that delivered before has delivered nothing for longer than
  :data:`SENDER_SILENCE_S`, a day (ArcGIS deactivates a webhook after failed deliveries; its
  ``notificationStatus`` tells);
* refused signatures (WARN): deliveries claiming to be a sender refused for their signature in
  the window (a wrong ``signatureKey`` on one side deactivates the webhook, or someone forges
  deliveries).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence

from ..errors import FailureClass
from ..ledger import BAD_SIGNATURE, DELIVERED, LedgerState, SenderCount
from ..config.settings import Settings

__all__ = ["AlertLevel", "Alert", "ledger_alerts", "sender_alerts", "human_age",
           "JUNK_WARN_COUNT", "SENDER_SILENCE_S"]

#: Bodies of one evidence cause in the window from which ``check`` warns (and the shipped
#: Prometheus rule FairJunkDeliveries fires): a pattern, not a stray POST.
JUNK_WARN_COUNT = 5
#: How long a webhook sender that delivered before may stay silent before ``check`` warns: a
#: day (a layer nobody edits sends nothing, so shorter would page for quiet weekends' nights).
SENDER_SILENCE_S = 86400.0


def human_age(seconds: Optional[float]) -> str:
    """An age as people read it at a glance: seconds up to two minutes, then minutes, then
    hours past two hours (``check --json`` and ``/metrics`` have the seconds)."""
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


class AlertLevel(enum.IntEnum):
    """How bad it is; the exit code of ``check``."""

    OK = 0
    WARN = 1
    ALERT = 2


@dataclass(frozen=True)
class Alert:
    """One signal past its threshold."""

    level: AlertLevel
    signal: str
    message: str


def ledger_alerts(settings: Settings, ledger: LedgerState, *, dead_in_window: Mapping[str, int],
                  finished_in_window: int) -> List[Alert]:
    """The pages the ledger's state calls for (see the module docstring)."""
    alerts: List[Alert] = []
    promise = settings.intake.latency_promise_s
    stalled = ledger.stalled_for_s
    if stalled is not None and stalled > promise:
        oldest = ledger.age(ledger.oldest_due_created_at) or 0.0
        alerts.append(Alert(AlertLevel.ALERT, "stall",
                            f"stall: {ledger.due} task(s) due and no task finished for "
                            f"{human_age(stalled)} (over the {promise:g} s promise); the "
                            f"oldest due task is {human_age(oldest)} old: is any processor "
                            f"running?"))
    else:
        overdue = ledger.age(ledger.oldest_due_created_at)
        if ledger.due and overdue is not None and overdue > promise:
            # engines are finishing other work (critical types first, newer retries) while
            # these photos wait: the promise is broken for them, no engine is stuck
            alerts.append(Alert(AlertLevel.WARN, "overdue",
                                f"overdue: {ledger.due} task(s) due, the oldest registered "
                                f"{human_age(overdue)} ago (over the {promise:g} s promise) "
                                f"while engines finish other work: more engines "
                                f"(intake.engines) or a lower intake.watermark"))
    alerts += _dead_letter_alerts(settings, ledger, dead_in_window, finished_in_window)
    if ledger.expired_leases:
        expired = ledger.age(ledger.oldest_expiry) or 0.0
        level = AlertLevel.ALERT if expired > promise else AlertLevel.WARN
        alerts.append(Alert(level, "leases",
                            f"{ledger.expired_leases} lease(s) not renewed, the oldest expired "
                            f"{human_age(expired)} ago: a processor stopped (the compensator's "
                            f"reaper hands its tasks back)"))
    waited = ledger.age(ledger.review_oldest_at)
    limit = settings.alerts.review_age_s
    if ledger.review_queue and waited is not None and waited > limit:
        alerts.append(Alert(AlertLevel.WARN, "review_queue",
                            f"review queue: {ledger.review_queue} photo(s), the oldest waiting "
                            f"{human_age(waited)} (over alerts.review_age_s={limit:g}): "
                            f"run `review list`"))
    return alerts


def sender_alerts(senders: Sequence[SenderCount], *, now: float,
                  window_s: float) -> List[Alert]:
    """Warnings about the webhook senders (see the module docstring)."""
    alerts: List[Alert] = []
    silence = SENDER_SILENCE_S
    for count in senders:
        quiet = now - count.last_at
        if count.event == DELIVERED and quiet > silence:
            alerts.append(Alert(AlertLevel.WARN, "sender_silent",
                                f"no delivery from {count.sender} for {human_age(quiet)} "
                                f"(over a day): if the layer was "
                                f"edited since, the webhook may be deactivated: read its "
                                f"notificationStatus (docs/intake.md, Senders)"))
        elif count.event == BAD_SIGNATURE and quiet <= window_s:
            alerts.append(Alert(AlertLevel.WARN, "sender_signatures",
                                f"deliveries claiming to be {count.sender} refused for their "
                                f"signature, the last {human_age(quiet)} ago ({count.n} in "
                                f"all): check that the webhook's signatureKey is the gateway's "
                                f"--arcgis-signature-key-env; ArcGIS deactivates a webhook after "
                                f"its failures"))
    return alerts


def _dead_letter_alerts(settings: Settings, ledger: LedgerState, dead: Mapping[str, int],
                        finished: int) -> List[Alert]:
    alerts: List[Alert] = []
    evidence = {c.value for c in FailureClass if c.evidence}
    tasks = {k: v for k, v in dead.items() if k not in evidence}
    total = sum(tasks.values())
    finished -= sum(dead.values()) - total
    ratio = settings.alerts.dead_letter_ratio
    if total and finished and total / finished > ratio:
        causes = ", ".join(f"{k} {v}" for k, v in sorted(tasks.items()))
        alerts.append(Alert(AlertLevel.ALERT, "dead_letters",
                            f"{total} of {finished} task(s) finished in the window are dead "
                            f"letters ({causes}; over alerts.dead_letter_ratio={ratio:g}): "
                            f"run `dlq list`"))
    for cause, n in sorted(dead.items()):
        if cause in evidence:
            if n >= JUNK_WARN_COUNT:
                alerts.append(Alert(AlertLevel.WARN, "junk_deliveries",
                                    f"{n} deliveries kept as evidence ({cause}) in the window: "
                                    f"a sender posts junk: run `dlq list --cause {cause}`"))
        elif n and ledger.outcomes.dead.get(cause, 0) <= n:
            alerts.append(Alert(AlertLevel.ALERT, "new_dead_letter_cause",
                                f"a new dead-letter cause: {cause} ({n} in the window, none "
                                f"before): run `dlq list --cause {cause}`"))
    return alerts
