"""The Prometheus text ``/metrics`` serves, by Prometheus's conventions.

Pure: the ledger's triggers keep the counts (``fme_ai_resilience.store.metric_rows`` reads
them into a :class:`~fme_ai_resilience.core.observe.totals.LedgerMetrics`); a gateway keeps
its own requests (a :class:`~fme_ai_resilience.core.observe.totals.GatewayCounts` snapshot);
:func:`prometheus_text` writes both, with the levels of the
:class:`~fme_ai_resilience.core.observe.signals.GoldenSignals`, in the text exposition format
0.0.4, by Prometheus's conventions:

* counters (``_total``, never decreasing: a pruned call log or a requeued dead letter takes
  nothing back) for what happened: AI calls by outcome, dead letters by cause, tasks finished,
  format anomalies, analyses reused, and the gateway's webhooks by answer and requests. Every
  label set the ledger can count is exported from the start (0 before its first event), so
  ``increase()`` sees a first burst: Prometheus takes a series' first sample as its baseline;
* histograms (seconds, the buckets of ``totals.BUCKETS_S``, cumulative) for how long it took:
  intake (webhook arrival to registration), one AI call by phase, end to end (registration to
  analysis), the gateway's requests;
* gauges only for levels: the backlog, photos by state, what stands in the ledger now, the
  breakers and the ladder, the alert level, and the thresholds the alert rules compare with.

Rates and percentiles are Prometheus's to compute; ``status`` and ``check --json`` show the
same counts (``LedgerMetrics.as_dict``), without the label sets still at 0.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..config.settings import Settings
from ..errors import ErrorClass, FailureClass
from ..resilience.breaker import CircuitState
from ..resilience.degrade import LadderState
from .signals import GoldenSignals
from .totals import GatewayCounts, Histogram, Labels, LedgerMetrics, number

__all__ = ["prometheus_text"]

_BREAKER_LEVEL = {CircuitState.CLOSED: 0, CircuitState.HALF_OPEN: 1, CircuitState.OPEN: 2}

#: The (status, kind) of a finished task, as the ledger's triggers count them.
_FINISHED = (("SUCCEEDED", "analysed"), ("SUCCEEDED", "skipped_by_policy"),
             ("SUCCEEDED", "expanded"), ("DEAD", "dead_letter"))

#: The call log's services besides the Vision AI's: photo downloads and ArcGIS calls.
_OTHER_SERVICES = ("photos", "arcgis")


class _Text:
    """The exposition being written: one ``# HELP``/``# TYPE`` header per family."""

    def __init__(self) -> None:
        self.lines: List[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[Tuple[str, Labels, float]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for suffix, labels, value in samples:
            self.lines.append(f"{name}{suffix}{_labels(labels)} {number(value)}")

    def gauge(self, name: str, help_text: str, values: Mapping[Labels, Optional[float]]) -> None:
        self.family(name, "gauge", help_text, (("", k, v or 0.0) for k, v in values.items()))

    def counter(self, name: str, help_text: str, values: Mapping[Labels, int]) -> None:
        # the text format 0.0.4 names a counter's family with its samples' _total
        self.family(name + "_total", "counter", help_text,
                    (("", k, v) for k, v in values.items()))

    def histogram(self, name: str, help_text: str, values: Mapping[Labels, Histogram]) -> None:
        samples: List[Tuple[str, Labels, float]] = []
        for labels, h in values.items():
            samples += [("_bucket", labels + (("le", number(le)),), n)
                        for le, n in h.cumulative()]
            samples += [("_sum", labels, h.total), ("_count", labels, h.count)]
        self.family(name, "histogram", help_text, samples)


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _one(value: Optional[float]) -> Dict[Labels, Optional[float]]:
    return {(): value}


def _by(label: str, values: Mapping[str, Any]) -> Dict[Labels, Any]:
    return {((label, str(k)),): v for k, v in sorted(values.items())}


def prometheus_text(settings: Settings, *, signals: Optional[GoldenSignals] = None,
                    ledger: Optional[LedgerMetrics] = None,
                    gateway: Optional[GatewayCounts] = None, version: str = "") -> str:
    """``/metrics``: the ledger's counters, histograms and levels (``signals`` and ``ledger``,
    None while the ledger is unreachable: then ``fair_ledger_up`` is 0), the gateway's own
    requests, and the settings the alert rules compare with."""
    out = _Text()
    if gateway is not None:
        _gateway_metrics(out, gateway)
    up = signals is not None and ledger is not None
    if signals is not None and ledger is not None:
        _ledger_counts(out, ledger, _services(settings))
        _levels(out, signals, ledger)
    out.gauge("fair_ledger_up", "1 when the ledger answered this scrape, else 0",
              _one(1 if up else 0))
    out.gauge("fair_latency_promise_seconds", "The latency promise (intake.latency_promise_s)",
              _one(settings.intake.latency_promise_s))
    limits = settings.alerts
    out.gauge("fair_alert_threshold", "The alert thresholds of the deployment's settings",
              _by("name", {"anomaly_rate": limits.anomaly_rate,
                           "dead_letter_ratio": limits.dead_letter_ratio,
                           "backlog_ratio": limits.backlog_ratio,
                           "review_age_seconds": limits.review_age_s,
                           "e2e_p95_warning_ratio": limits.e2e_p95_warning_ratio}))
    out.gauge("fair_ai_call_cost", "What one Vision AI call costs (cost.per_call)",
              _by("currency", {settings.cost.currency: settings.cost.per_call}))
    out.gauge("fair_build_info", "The package's version", _by("version", {version or "0": 1}))
    return "\n".join(out.lines) + "\n"


def _gateway_metrics(out: _Text, g: GatewayCounts) -> None:
    out.counter("fair_webhooks", "Webhooks this gateway answered, by answer",
                _by("answer", g.webhooks))
    out.counter("fair_http_requests", "Requests this gateway answered, by handler and code",
                {(("code", code), ("handler", handler)): n
                 for (handler, code), n in sorted(g.requests.items())})
    out.histogram("fair_http_request_duration_seconds", "How long this gateway took to answer, "
                  "by handler", _by("handler", g.durations))


def _services(settings: Settings) -> Tuple[str, ...]:
    """The services the call log names: the Vision AI's (and its fallback's, when one is
    configured), the photo downloads and ArcGIS."""
    vision = settings.vision
    own = (vision.service,) + ((vision.fallback_service,) if vision.fallback_endpoint else ())
    return own + _OTHER_SERVICES


def _with_zeros(counted: Mapping[Labels, int], known: Iterable[Labels]) -> Dict[Labels, int]:
    """``counted``, with 0 for every label set in ``known`` it has not counted yet."""
    values = {labels: 0 for labels in known}
    values.update(counted)
    return dict(sorted(values.items()))


def _ledger_counts(out: _Text, m: LedgerMetrics, services: Tuple[str, ...]) -> None:
    outcomes = ["ok"] + [e.value for e in ErrorClass]
    out.counter("fair_ai_calls", "Outbound calls logged, by service and outcome (ok or the "
                "error class)",
                _with_zeros(m.counter("ai_calls"), ((("outcome", o), ("service", s))
                                                    for s in services for o in outcomes)))
    out.counter("fair_dead_letters", "Tasks that became dead letters, by cause",
                _with_zeros(m.counter("dead_letters"),
                            ((("cause", c.value),) for c in FailureClass)))
    out.counter("fair_tasks_completed", "Tasks finished, by status and kind",
                _with_zeros(m.counter("tasks_completed"),
                            ((("kind", k), ("status", s)) for s, k in _FINISHED)))
    out.counter("fair_format_anomalies", "Vision AI answers out of schema",
                m.counter("format_anomalies"))
    out.counter("fair_reused_analyses", "Analyses reused instead of paid for",
                m.counter("reused_analyses"))
    out.histogram("fair_intake_latency_seconds", "Webhook arrival to registration",
                  m.histogram("intake_latency_seconds"))
    out.histogram("fair_ai_call_duration_seconds", "One outbound call, by service and phase",
                  m.histogram("ai_call_duration_seconds"))
    out.histogram("fair_end_to_end_seconds", "Registration to analysis, of analysed photos",
                  m.histogram("end_to_end_seconds"))


def _levels(out: _Text, s: GoldenSignals, m: LedgerMetrics) -> None:
    out.gauge("fair_backlog", "Tasks registered and not finished", _one(s.backlog))
    out.gauge("fair_watermark", "The backlog the engines drain within the promise",
              _one(s.watermark))
    f = s.ledger_figures()
    if f is not None:
        out.gauge("fair_photos", "Photos in the ledger by where they stand",
                  _by("state", {k: f[k] for k in (
                      "analysed", "accepted", "review", "awaiting_analysis", "held_back",
                      "in_review", "reviewed", "skipped_by_policy", "expanded")}))
        out.gauge("fair_dead_letters_in_ledger", "Dead letters standing in the ledger, by cause",
                  _by("cause", f["dead_by_cause"]))
        out.gauge("fair_due_tasks", "Tasks due now", _one(f["due"]))
        for name, key, help_text in (
                ("fair_stalled_seconds", "stalled_for_s",
                 "How long due work has seen no task finish (0: none due or not stalled)"),
                ("fair_oldest_due_age_seconds", "oldest_due_age_s",
                 "Age of the oldest due task (0: none due)"),
                ("fair_expired_leases", "expired_leases",
                 "Leases nobody renewed (a processor stopped)"),
                ("fair_oldest_expired_lease_seconds", "oldest_expired_lease_s",
                 "How long ago the oldest unrenewed lease expired (0: none)"),
                ("fair_review_queue", "review_queue", "Photos waiting for a person"),
                ("fair_review_oldest_age_seconds", "review_oldest_age_s",
                 "How long the oldest photo in review has waited (0: none waits)")):
            out.gauge(name, help_text, _one(f[key]))
    out.gauge("fair_breaker_state", "Each circuit: 0 closed, 1 half-open, 2 open",
              _by("service", {k: _BREAKER_LEVEL[b.state] for k, b in m.breakers.items()}))
    out.gauge("fair_breaker_state_seconds", "How long each circuit has been in its state",
              _by("service", {k: max(0.0, m.observed_at - b.changed_at)
                              for k, b in m.breakers.items()}))
    ladder = m.ladder or LadderState()
    out.gauge("fair_degradation_level", "The degradation ladder's level in force (0..4)",
              _one(int(ladder.effective)))
    out.gauge("fair_degradation_held", "1 when an operator holds the ladder, else 0",
              _one(1 if ladder.override is not None else 0))
    out.gauge("fair_alert_level", "check's level: 0 ok, 1 warn, 2 alert", _one(int(s.level)))
