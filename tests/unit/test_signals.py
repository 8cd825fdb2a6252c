"""The golden signals over a window and their alerts (the /metrics text: test_metrics_text)."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.ledger import (CallRecord, CallSample, CompletionSample,
                                           FormatAnomaly, RegistrationSample, Status, TaskOutcome)
from fme_ai_resilience.services.observe.signals import read_signals
from fme_ai_resilience.core.observe.signals import AlertLevel, golden_signals
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

NOW = 1_790_000_000.0


def signals(settings=None, *, calls=(), completions=(), registrations=(), backlog=0,
            anomalies=0):
    return golden_signals(settings or Settings(), calls=list(calls),
                          completions=list(completions), registrations=list(registrations),
                          backlog=backlog, format_anomalies=anomalies, now=NOW)


def call(duration=0.5, error=None, service="vision"):
    return CallSample(service, NOW - 60, duration, error, False)


def done(e2e, status=Status.SUCCEEDED, cause=None, reused=False):
    return CompletionSample(NOW - 100 - e2e, NOW - 100, status,
                            TaskOutcome.ACCEPTED if status is Status.SUCCEEDED else None,
                            cause, reused)


def test_a_quiet_pipeline_is_ok():
    """Nothing past a threshold: level OK, exit 0, a one-line summary."""
    s = signals(calls=[call()] * 10, completions=[done(30)] * 10, backlog=5)
    assert s.level is AlertLevel.OK and s.summary().startswith("OK:")


def test_latency_traffic_errors_saturation_and_spend():
    """P95s, per-minute rates, errors by class, dead letters by cause, backlog, spend."""
    settings = Settings().with_values({"cost.per_call": "0.002", "alerts.window_s": "600"})
    calls = [call(d / 10) for d in range(1, 21)] + [call(9.0, "SERVER_ERROR")] + \
        [call(1.0, service="photos")]
    completions = [done(40, reused=True), done(60), done(0, Status.DEAD,
                                                          FailureClass.NOT_FOUND)]
    registrations = [RegistrationSample(NOW - 10, NOW - 10.25, "survey123"),
                     RegistrationSample(NOW - 20, None, "reconcile")]
    s = signals(settings, calls=calls, completions=completions, registrations=registrations,
                backlog=24)
    assert s.ai_calls == 21 and s.ai_calls_per_min == pytest.approx(2.1)
    assert s.ai_call_p95_s == 2.0 and s.end_to_end_p95_s == 60
    assert s.intake_p95_s == pytest.approx(0.25) and s.webhooks_per_min == pytest.approx(0.1)
    assert dict(s.errors_by_class) == {"SERVER_ERROR": 1}
    assert dict(s.dead_by_cause) == {"NOT_FOUND": 1} and s.reused_analyses == 1
    assert (s.backlog, s.watermark, s.backlog_ratio) == (24, 48, 0.5)
    assert s.spend == pytest.approx(0.042)


def test_format_anomalies_above_five_percent_are_an_alert():
    """Seed 9.1: anomaly rate > 5 % of AI calls: ALERT."""
    s = signals(calls=[call()] * 20, anomalies=2)
    assert s.level is AlertLevel.ALERT and "format anomalies" in s.summary()
    assert signals(calls=[call()] * 20, anomalies=1).level is AlertLevel.OK


def test_a_slow_end_to_end_p95_warns():
    """End-to-end P95 over 80 % of the latency promise (120 s): WARN."""
    assert signals(completions=[done(97)] * 20).level is AlertLevel.WARN
    assert signals(completions=[done(95)] * 20).level is AlertLevel.OK


def test_a_backlog_near_the_watermark_warns_of_backpressure():
    """Backlog over 80 % of the watermark (48): WARN."""
    assert signals(backlog=39).level is AlertLevel.WARN
    assert signals(backlog=38).level is AlertLevel.OK


def test_credentials_refused_are_an_alert():
    """An AUTH error or dead letter in the window: ALERT."""
    assert signals(calls=[call(error="AUTH")]).level is AlertLevel.ALERT
    assert signals(completions=[done(0, Status.DEAD, FailureClass.AUTH)]).level \
        is AlertLevel.ALERT


def test_read_signals_reads_the_window_from_the_ledger(tmp_path):
    """The signals computed from what the store holds for the window."""
    clock = FakeClock(NOW)
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as store:
        store.register(Submission("k", "F", trace_id_for("k")), 10, now=NOW - 30,
                       received_at=NOW - 30.5)
        (task,) = store.claim("e", 1, 60, now=NOW - 25)
        store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, {"reused": False},
                       now=NOW - 5)
        store.record_call(CallRecord("vision", NOW - 20, 1.5))
        store.record_anomaly(FormatAnomaly("generic", NOW - 19, ("drift",), "{}"))
        s = read_signals(Settings(), store=store, now=clock.now())
    assert (s.ai_calls, s.succeeded, s.format_anomalies) == (1, 1, 1)
    assert s.end_to_end_p95_s == 25 and s.intake_p95_s == pytest.approx(0.5)
    assert s.level is AlertLevel.ALERT   # 1 anomaly in 1 call
