"""/metrics by Prometheus's conventions: counters, histograms and level gauges that the reference
parser reads, the gateway's own request metrics, and an answer while the ledger is down."""
from __future__ import annotations

import io
import json
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import (ConfigurationError, ErrorClass, FailureClass,
                                          StoreUnavailable)
from fme_ai_resilience.core.ledger import LedgerState
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.observe.metrics import prometheus_text
from fme_ai_resilience.core.observe.signals import golden_signals
from fme_ai_resilience.core.observe.totals import (BUCKETS_S, GatewayCounts, Histogram,
                                                   LedgerMetrics)
from fme_ai_resilience.core.resilience.breaker import BreakerState, CircuitState
from fme_ai_resilience.core.resilience.degrade import LadderState, Level
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.store import open_store

from helpers import DATA

NOW = 1_790_000_000.0
BODY = (DATA / "survey123_add.json").read_bytes()

COUNTERS = {"fair_ai_calls", "fair_dead_letters", "fair_tasks_completed",
            "fair_format_anomalies", "fair_reused_analyses", "fair_webhooks",
            "fair_http_requests"}
HISTOGRAMS = {"fair_intake_latency_seconds", "fair_ai_call_duration_seconds",
              "fair_end_to_end_seconds", "fair_http_request_duration_seconds"}


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def ledger_metrics():
    latency = Histogram().observe(0.3).observe(0.3).observe(12.0)
    return LedgerMetrics(
        observed_at=NOW,
        counters={("ai_calls", (("outcome", "ok"), ("service", "vision"))): 7,
                  ("ai_calls", (("outcome", "TIMEOUT"), ("service", "vision"))): 2,
                  ("dead_letters", (("cause", "AUTH"),)): 1},
        histograms={("intake_latency_seconds", ()): latency,
                    ("ai_call_duration_seconds", (("phase", "total"), ("service", "vision"))):
                        Histogram().observe(0.4)},
        breakers={"vision": BreakerState(CircuitState.OPEN, changed_at=NOW - 90,
                                         open_until=NOW + 30)},
        ladder=LadderState(level=Level.SAMPLE, override=Level.FALLBACK))


def text(**kw):
    settings = Settings()
    signals = golden_signals(settings, calls=[], completions=[], registrations=[], backlog=3,
                             format_anomalies=0, now=NOW, ledger=LedgerState(observed_at=NOW),
                             metrics=ledger_metrics())
    gateway = GatewayCounts(requests={("webhook", "202"): 4}, webhooks={"accepted": 4},
                            durations={"webhook": Histogram().observe(0.02)})
    args = dict(signals=signals, ledger=signals.metrics, gateway=gateway, version="9.9")
    args.update(kw)
    return prometheus_text(settings, **args)


def test_every_family_has_the_type_prometheus_expects():
    """Counters for what happened, histograms for how long, gauges only for levels; no
    windowed rate or percentile is exported."""
    fams = families(text())
    assert {n for n, f in fams.items() if f.type == "counter"} == COUNTERS
    assert {n for n, f in fams.items() if f.type == "histogram"} == HISTOGRAMS
    assert all(f.type == "gauge" for n, f in fams.items() if n not in COUNTERS | HISTOGRAMS)
    assert not [n for n in fams if "per_minute" in n or "p95" in n]
    assert all(s.name.endswith("_total") for n in COUNTERS for s in fams[n].samples)
    assert "NaN" not in text()


def test_the_values_are_the_ledgers_and_the_gateways():
    """Counters by labels, the breaker and the ladder as levels, the gateway's own counts."""
    fams = families(text())
    calls = {s.labels["outcome"]: s.value for s in fams["fair_ai_calls"].samples
             if s.labels["service"] == "vision" and s.value}
    assert calls == {"ok": 7, "TIMEOUT": 2}
    assert [(s.labels, s.value) for s in fams["fair_breaker_state"].samples] == [
        ({"service": "vision"}, 2)]
    assert fams["fair_breaker_state_seconds"].samples[0].value == 90
    assert fams["fair_degradation_level"].samples[0].value == 2
    assert fams["fair_degradation_held"].samples[0].value == 1
    assert fams["fair_webhooks"].samples[0].labels == {"answer": "accepted"}
    assert fams["fair_http_requests"].samples[0].labels == {"handler": "webhook", "code": "202"}
    assert fams["fair_ledger_up"].samples[0].value == 1
    assert fams["fair_build_info"].samples[0].labels == {"version": "9.9"}
    thresholds = {s.labels["name"] for s in fams["fair_alert_threshold"].samples}
    assert thresholds == {"anomaly_rate", "dead_letter_ratio", "backlog_ratio",
                          "review_age_seconds", "e2e_p95_warning_ratio"}
    assert fams["fair_latency_promise_seconds"].samples[0].value == \
        Settings().intake.latency_promise_s


def test_histogram_buckets_are_cumulative_with_count_equal_to_inf_and_the_sum():
    """Every histogram: le ascending to +Inf, counts never falling, _count == +Inf, _sum."""
    fams = families(text())
    for name in HISTOGRAMS:
        series = {}
        for s in fams[name].samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, {"buckets": []})
            if s.name.endswith("_bucket"):
                series[key]["buckets"].append((float(s.labels["le"]), s.value))
            else:
                series[key][s.name[len(name) + 1:]] = s.value
        assert series, name
        for parts in series.values():
            bounds = [le for le, _ in parts["buckets"]]
            assert bounds == list(BUCKETS_S) + [math.inf]
            values = [v for _, v in parts["buckets"]]
            assert values == sorted(values) and values[-1] == parts["count"]
    (latency,) = [s for s in fams["fair_intake_latency_seconds"].samples
                  if s.name.endswith("_sum")]
    assert latency.value == pytest.approx(12.6)
    buckets = {s.labels["le"]: s.value for s in fams["fair_intake_latency_seconds"].samples
               if s.name.endswith("_bucket")}
    assert (buckets["0.25"], buckets["0.5"], buckets["10.0"], buckets["30.0"]) == (0, 2, 2, 3)


def test_a_histogram_refuses_counts_that_do_not_fit_its_buckets():
    """One count per bucket and +Inf, never negative; a negative observation counts as 0."""
    with pytest.raises(ConfigurationError, match="counts"):
        Histogram((1, 2))
    assert Histogram().observe(-3.0).counts[0] == 1 and Histogram().observe(-3.0).total == 0


def test_without_the_ledger_only_the_gateway_and_the_settings_are_exported():
    """fair_ledger_up 0 and the gateway's own metrics; no ledger figure pretends to be 0."""
    fams = families(text(signals=None, ledger=None))
    assert fams["fair_ledger_up"].samples[0].value == 0
    assert "fair_http_requests" in fams and "fair_ai_calls" not in fams
    assert "fair_backlog" not in fams


def test_every_label_set_the_ledger_can_count_is_exported_at_0_on_an_empty_ledger():
    """Every dead-letter cause, every finished (status, kind) and every outcome of every
    service in the call log is a series from the first scrape (0), so Prometheus's
    ``increase()`` counts a first burst of them instead of taking it as the baseline."""
    settings = Settings.from_mapping({"vision.fallback_endpoint": "https://fb.example/v1"})
    empty = LedgerMetrics(observed_at=NOW)
    signals = golden_signals(settings, calls=[], completions=[], registrations=[], backlog=0,
                             format_anomalies=0, now=NOW, ledger=LedgerState(observed_at=NOW),
                             metrics=empty)
    fams = families(prometheus_text(settings, signals=signals, ledger=empty))
    causes = {s.labels["cause"]: s.value for s in fams["fair_dead_letters"].samples}
    assert causes == {c.value: 0 for c in FailureClass}
    finished = {(s.labels["status"], s.labels["kind"]): s.value
                for s in fams["fair_tasks_completed"].samples}
    assert finished == {("SUCCEEDED", "analysed"): 0, ("SUCCEEDED", "skipped_by_policy"): 0,
                        ("SUCCEEDED", "expanded"): 0, ("DEAD", "dead_letter"): 0}
    calls = {(s.labels["service"], s.labels["outcome"]): s.value
             for s in fams["fair_ai_calls"].samples}
    services = ("vision", "vision-fallback", "photos", "arcgis")
    assert calls == {(service, outcome): 0 for service in services
                     for outcome in ["ok"] + [e.value for e in ErrorClass]}
    assert [s.value for s in fams["fair_format_anomalies"].samples] == [0]
    assert [s.value for s in fams["fair_end_to_end_seconds"].samples
            if s.name.endswith("_count")] == [0]
    counted = families(text())
    assert {s.labels["cause"]: s.value for s in counted["fair_dead_letters"].samples
            if s.value} == {"AUTH": 1}
    assert len(counted["fair_dead_letters"].samples) == len(FailureClass)


class DownStore:
    """A ledger whose database is gone: every operation fails as the store reports it."""

    dialect = "none"

    def __getattr__(self, name):
        def down(*args, **kwargs):
            raise StoreUnavailable("connection refused")
        return down


def get(app, path, **environ):
    seen = {}
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path,
                         "wsgi.input": io.BytesIO(), **environ},
                        lambda status, headers: seen.update(status=int(status[:3]))))
    return seen["status"], body.decode()


def post(app, body=BODY, content_type="application/json"):
    seen = {}
    answer = b"".join(app({"REQUEST_METHOD": "POST", "PATH_INFO": "/",
                           "wsgi.input": io.BytesIO(body), "CONTENT_TYPE": content_type,
                           "CONTENT_LENGTH": str(len(body))},
                          lambda status, headers: seen.update(status=int(status[:3]))))
    return seen["status"], json.loads(answer)


def test_metrics_answer_while_the_ledger_is_unreachable():
    """200 with the gateway's own requests and fair_ledger_up 0: the gateway is up."""
    app = make_app(store=DownStore(), clock=FakeClock(NOW))
    assert get(app, "/healthz")[0] == 503
    status, body = get(app, "/metrics")
    fams = families(body)
    assert status == 200 and fams["fair_ledger_up"].samples[0].value == 0
    requests = {(s.labels["handler"], s.labels["code"]): s.value
                for s in fams["fair_http_requests"].samples}
    assert requests == {("health", "503"): 1}


def test_the_gateway_counts_its_requests_and_webhooks_by_answer(tmp_path):
    """An accepted webhook, its duplicate, a body that is no JSON and a health check: each
    counted by handler and code, the webhooks by answer, every duration observed."""
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as store:
        app = make_app(store=store, clock=FakeClock(NOW))
        assert post(app)[0] == 202
        assert post(app)[1]["status"] == "duplicate_in_progress"
        assert post(app, b"x", "text/plain")[0] == 415
        assert get(app, "/healthz")[0] == 200
        fams = families(get(app, "/metrics")[1])
    webhooks = {s.labels["answer"]: s.value for s in fams["fair_webhooks"].samples}
    assert webhooks == {"accepted": 1, "duplicate_in_progress": 1, "unsupported_media_type": 1}
    requests = {(s.labels["handler"], s.labels["code"]): s.value
                for s in fams["fair_http_requests"].samples}
    assert requests[("webhook", "202")] == 2 and requests[("webhook", "415")] == 1
    assert requests[("health", "200")] == 1
    counts = {s.labels["handler"]: s.value for s in
              fams["fair_http_request_duration_seconds"].samples if s.name.endswith("_count")}
    assert counts == {"webhook": 3, "health": 1}
