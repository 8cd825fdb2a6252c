"""The golden signals over a window and the alerts they raise.

Pure: :func:`golden_signals` takes what the ledger and the call log hold for the window
(samples read by ``fme_ai_resilience.services.observe.signals``) and computes:

* latency, P95: intake (webhook arrival to registration), the AI call, end to end
  (registration to analysis);
* traffic: webhooks and AI calls per minute, analyses reused, tasks finished, of them
  analysed (SUCCEEDED, ACCEPTED or REVIEW) and skipped by policy, never the one for the other;
* errors: AI calls by error class, dead letters by cause;
* saturation: the backlog against the watermark;
* spend: AI calls x ``cost.per_call``;
* the ledger (a :class:`~fme_ai_resilience.core.ledger.LedgerState`, when read): analysed,
  awaiting analysis (held back by the ladder), in review, skipped by policy and dead by cause,
  the due work and the stall, leases nobody renewed, the review queue's age;

and the seed's alerts (section 9.1): format anomalies above ``alerts.anomaly_rate`` of the AI
calls is an ALERT; an end-to-end P95 above ``alerts.e2e_p95_warning_ratio`` of the latency
promise a WARN; a backlog above ``alerts.backlog_ratio`` of the watermark a WARN
(backpressure); an AUTH dead letter or error in the window an ALERT (credentials); and the
pages of :mod:`fme_ai_resilience.core.observe.alerts` (stall, dead letters, leases, review queue,
webhook senders gone silent or refused for their signature).
``check`` turns the worst level into its exit code (0 ok, 1 warn, 2 alert). The windowed
figures are ``status``'s and ``check``'s (the alerts use the window); the ledger's monotonic
counts and histograms (:class:`~fme_ai_resilience.core.observe.totals.LedgerMetrics`, carried
as ``metrics``) are what ``/metrics`` exports
(:func:`fme_ai_resilience.core.observe.metrics.prometheus_text`), and ``status`` and
``check --json`` show them too, under ``totals``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..resilience.calibrate import percentile
from ..errors import ErrorClass, FailureClass
from ..ledger import (CallSample, CompletionSample, LedgerState, RegistrationSample, SenderCount,
                      Status)
from .alerts import Alert, AlertLevel, ledger_alerts, sender_alerts
from .totals import LedgerMetrics
from ..config.settings import Settings

__all__ = ["AlertLevel", "Alert", "GoldenSignals", "golden_signals"]


def _p95(values: Sequence[float]) -> Optional[float]:
    return percentile(values, 95) if values else None


@dataclass(frozen=True)
class GoldenSignals:
    """The signals over ``window_s`` seconds up to ``window_end`` (see the module docstring).

    Latencies are seconds (None without samples); rates per minute.
    """

    window_end: float
    window_s: float
    intake_p95_s: Optional[float]
    ai_call_p95_s: Optional[float]
    end_to_end_p95_s: Optional[float]
    webhooks_per_min: float
    ai_calls_per_min: float
    ai_calls: int
    reused_analyses: int
    completed: int
    succeeded: int
    errors_by_class: Mapping[str, int]
    dead_by_cause: Mapping[str, int]
    backlog: int
    watermark: int
    format_anomalies: int
    spend: float
    currency: str
    alerts: Tuple[Alert, ...] = ()
    samples_capped: bool = False
    analysed: int = 0
    skipped: int = 0
    ledger: Optional[LedgerState] = None
    metrics: Optional[LedgerMetrics] = None
    senders: Tuple[SenderCount, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "errors_by_class", MappingProxyType(dict(self.errors_by_class)))
        object.__setattr__(self, "dead_by_cause", MappingProxyType(dict(self.dead_by_cause)))
        object.__setattr__(self, "alerts", tuple(self.alerts))

    @property
    def backlog_ratio(self) -> float:
        return self.backlog / self.watermark if self.watermark else 0.0

    @property
    def anomaly_rate(self) -> float:
        return self.format_anomalies / self.ai_calls if self.ai_calls else 0.0

    @property
    def level(self) -> AlertLevel:
        """The worst alert level (OK when nothing is past a threshold)."""
        return max((a.level for a in self.alerts), default=AlertLevel.OK)

    def summary(self) -> str:
        """One line for a monitor: the level and what raised it."""
        if not self.alerts:
            return (f"OK: backlog {self.backlog}/{self.watermark}, "
                    f"{self.ai_calls_per_min:.1f} AI calls/min, "
                    f"end-to-end P95 {_seconds(self.end_to_end_p95_s)}")
        worst = [a for a in self.alerts if a.level is self.level]
        return f"{self.level.name}: " + "; ".join(a.message for a in worst)

    def ledger_figures(self) -> Optional[Dict[str, Any]]:
        """The ledger's figures (honest counts, due work, leases, review queue), or None."""
        led = self.ledger
        if led is None:
            return None
        return {**led.outcomes.as_dict(),
                "due": led.due, "stalled_for_s": _round(led.stalled_for_s),
                "oldest_due_age_s": _round(led.age(led.oldest_due_created_at)),
                "last_progress_age_s": _round(led.age(led.last_progress_at)),
                "expired_leases": led.expired_leases,
                "oldest_expired_lease_s": _round(led.age(led.oldest_expiry)),
                "review_queue": led.review_queue,
                "review_oldest_age_s": _round(led.age(led.review_oldest_at))}

    def as_dict(self) -> Dict[str, object]:
        """A JSON-ready form (``status --json``, ``check --json``)."""
        return {
            "window_s": self.window_s, "level": self.level.name,
            "latency_p95_s": {"intake": self.intake_p95_s, "ai_call": self.ai_call_p95_s,
                              "end_to_end": self.end_to_end_p95_s},
            "traffic": {"webhooks_per_min": self.webhooks_per_min,
                        "ai_calls_per_min": self.ai_calls_per_min, "ai_calls": self.ai_calls,
                        "reused_analyses": self.reused_analyses, "completed": self.completed,
                        "succeeded": self.succeeded, "analysed": self.analysed,
                        "skipped_by_policy": self.skipped},
            "errors": {"by_class": dict(self.errors_by_class),
                       "dead_by_cause": dict(self.dead_by_cause)},
            "saturation": {"backlog": self.backlog, "watermark": self.watermark,
                           "backlog_ratio": round(self.backlog_ratio, 4)},
            "format_anomalies": {"count": self.format_anomalies,
                                 "rate": round(self.anomaly_rate, 4)},
            "spend": {"amount": round(self.spend, 4), "currency": self.currency},
            "alerts": [{"level": a.level.name, "signal": a.signal, "message": a.message}
                       for a in self.alerts],
            "samples_capped": self.samples_capped,
            "ledger": self.ledger_figures(),
            "totals": None if self.metrics is None else self.metrics.as_dict(),
            "senders": [{"sender": c.sender, "event": c.event, "n": c.n,
                         "last_at": c.last_at} for c in self.senders],
        }


def _seconds(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


def golden_signals(settings: Settings, *, calls: Sequence[CallSample],
                   completions: Sequence[CompletionSample],
                   registrations: Sequence[RegistrationSample], backlog: int,
                   format_anomalies: int, now: float, window_s: Optional[float] = None,
                   sample_limit: Optional[int] = None,
                   ledger: Optional[LedgerState] = None,
                   metrics: Optional[LedgerMetrics] = None,
                   senders: Sequence[SenderCount] = ()) -> GoldenSignals:
    """The signals over the window ending at ``now`` (``alerts.window_s`` by default), with
    the ledger's figures and pages when ``ledger`` is given, its monotonic totals when
    ``metrics`` is, and the webhook senders' warnings from ``senders``."""
    window = settings.alerts.window_s if window_s is None else window_s
    since = now - window
    minutes = window / 60.0
    ai_services = {settings.vision.service, settings.vision.fallback_service}
    ai = [c for c in calls if c.service in ai_services and c.started_at >= since]
    done = [c for c in completions if c.completed_at >= since]
    fresh = [r for r in registrations if r.created_at >= since]
    errors: Dict[str, int] = {}
    for call in ai:
        if call.error_class is not None:
            errors[call.error_class] = errors.get(call.error_class, 0) + 1
    dead: Dict[str, int] = {}
    for c in done:
        if c.status is Status.DEAD:
            cause = c.failure_class.value if c.failure_class else "UNKNOWN"
            dead[cause] = dead.get(cause, 0) + 1
    succeeded = [c for c in done if c.status is Status.SUCCEEDED and not c.expanded]
    analysed = [c for c in succeeded if c.outcome is None or c.outcome.analysed]
    capped = sample_limit is not None and any(
        len(s) >= sample_limit for s in (calls, completions, registrations))
    signals = GoldenSignals(
        window_end=now, window_s=window,
        intake_p95_s=_p95([r.created_at - r.received_at for r in fresh
                           if r.received_at is not None]),
        ai_call_p95_s=_p95([c.duration_s for c in ai]),
        end_to_end_p95_s=_p95([c.completed_at - c.created_at for c in analysed]),
        webhooks_per_min=sum(1 for r in fresh if r.source == "survey123") / minutes,
        ai_calls_per_min=len(ai) / minutes, ai_calls=len(ai),
        reused_analyses=sum(1 for c in analysed if c.reused), completed=len(done),
        succeeded=len(succeeded), errors_by_class=errors, dead_by_cause=dead,
        backlog=backlog, watermark=settings.intake.capacity.watermark,
        format_anomalies=format_anomalies, spend=len(ai) * settings.cost.per_call,
        currency=settings.cost.currency, samples_capped=capped, analysed=len(analysed),
        skipped=len(succeeded) - len(analysed), ledger=ledger, metrics=metrics,
        senders=tuple(senders))
    return _with_alerts(signals, settings)


def _with_alerts(s: GoldenSignals, settings: Settings) -> GoldenSignals:
    alerts: List[Alert] = []
    limits = settings.alerts
    if s.ai_calls and s.anomaly_rate > limits.anomaly_rate:
        alerts.append(Alert(AlertLevel.ALERT, "format_anomalies",
                            f"format anomalies in {s.anomaly_rate:.0%} of AI calls (threshold "
                            f"{limits.anomaly_rate:.0%}): the service's answers drifted"))
    auth = s.errors_by_class.get(ErrorClass.AUTH.value, 0) + s.dead_by_cause.get(
        FailureClass.AUTH.value, 0)
    if auth:
        alerts.append(Alert(AlertLevel.ALERT, "auth",
                            f"{auth} call(s) or task(s) refused for credentials: check the "
                            f"Vision key and the ArcGIS credential"))
    promise = settings.intake.latency_promise_s
    if s.end_to_end_p95_s is not None and \
            s.end_to_end_p95_s > limits.e2e_p95_warning_ratio * promise:
        alerts.append(Alert(AlertLevel.WARN, "end_to_end_latency",
                            f"end-to-end P95 {s.end_to_end_p95_s:.0f} s is over "
                            f"{limits.e2e_p95_warning_ratio:.0%} of the {promise:g} s promise"))
    if s.watermark and s.backlog_ratio > limits.backlog_ratio:
        alerts.append(Alert(AlertLevel.WARN, "backlog",
                            f"backlog {s.backlog} is over {limits.backlog_ratio:.0%} of the "
                            f"watermark {s.watermark}: backpressure"))
    if s.ledger is not None:
        alerts += ledger_alerts(settings, s.ledger, dead_in_window=s.dead_by_cause,
                                finished_in_window=s.completed)
    alerts += sender_alerts(s.senders, now=s.window_end, window_s=s.window_s)
    return replace(s, alerts=tuple(alerts))
