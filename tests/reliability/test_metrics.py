"""/metrics by Prometheus's conventions, and intake latency recorded from the webhook's arrival:
the figures an operator alerts on are counters that never go back, histograms with cumulative
buckets, and the same in ``status``, ``check`` and ``/metrics``."""
from __future__ import annotations

import io
import json
import time

from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.intake.submission import Submission
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.services.observe.signals import read_signals
from fme_ai_resilience.store import open_store

from helpers import DATA

BODY = (DATA / "survey123_add.json").read_bytes()
T0 = 1_790_000_000.0


def recent():
    """A minute ago: inside the window ``status`` and ``check`` read at the wall clock."""
    return time.time() - 60


class SteppingClock(FakeClock):
    """Time moves 0.25 s at every reading: the registration comes after the arrival."""

    def now(self) -> float:
        self.advance(0.25)
        return super().now()


def scrape(app):
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                         "wsgi.input": io.BytesIO()}, lambda status, headers: None)).decode()
    return body, {f.name: f for f in text_string_to_metric_families(body)}


def deliver(app):
    seen = {}
    b"".join(app({"REQUEST_METHOD": "POST", "PATH_INFO": "/", "wsgi.input": io.BytesIO(BODY),
                  "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(BODY))},
                 lambda status, headers: seen.update(status=int(status[:3]))))
    return seen["status"]


def test_intake_latency_is_recorded_from_the_webhooks_arrival(tmp_path, capsys):
    """Guarantee: A webhook registered after it arrived shows its intake latency in the signals, in
    ``status --json`` and in /metrics (a histogram): never ``n/a`` or NaN."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True) as store:
        app = make_app(store=store, clock=SteppingClock(recent()))
        assert deliver(app) == 202
        signals = read_signals(Settings(), store=store, now=time.time())
        text, families = scrape(app)
    assert signals.intake_p95_s is not None and signals.intake_p95_s > 0
    assert "NaN" not in text
    latency = families["fair_intake_latency_seconds"]
    assert latency.type == "histogram"
    count = [s.value for s in latency.samples if s.name.endswith("_count")]
    total = [s.value for s in latency.samples if s.name.endswith("_sum")]
    assert count == [1] and total[0] > 0
    assert main(["status", "--db", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["signals"]
    assert status["latency_p95_s"]["intake"] is not None


def _counters(families):
    return {(name, tuple(sorted(s.labels.items()))): s.value
            for name, f in families.items() if f.type == "counter" for s in f.samples}


def test_metrics_are_counters_that_survive_a_prune_and_a_requeue(tmp_path):
    """Guarantee: AI calls, dead letters and finished tasks are counters (``_total``) that do not go down
    when the call log is pruned or a dead letter requeued; durations are histograms."""
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        store.record_call(CallRecord("vision", T0, 0.4, "TIMEOUT"))
        store.register(Submission("k", "F-k", trace_id_for("k")), 100, now=T0)
        (task,) = store.claim("engine", 1, 60, now=T0)
        store.bury("k", task.lease_token, FailureClass.BUDGET, "spent", now=T0 + 1)
        app = make_app(store=store, clock=FakeClock(T0 + 10))
        _, before = scrape(app)
        for name in ("fair_ai_calls", "fair_dead_letters", "fair_tasks_completed"):
            assert before[name].type == "counter", name
        for name in ("fair_ai_call_duration_seconds", "fair_intake_latency_seconds",
                     "fair_end_to_end_seconds"):
            assert before[name].type == "histogram", name
        store.prune(calls_before=T0 + 3600, anomalies_before=T0 + 3600)
        assert store.requeue(["k"], now=T0 + 20) == 1
        _, after = scrape(app)
    counted_before, counted_after = _counters(before), _counters(after)
    assert counted_before[("fair_ai_calls", (("outcome", "TIMEOUT"), ("service", "vision")))] == 1
    for key, value in counted_before.items():
        if key[0] not in ("fair_http_requests", "fair_webhooks"):
            assert counted_after[key] >= value, key


def test_status_check_and_metrics_agree_on_every_total(tmp_path, capsys):
    """Guarantee: Every counter and every histogram's count and sum: the same in ``status --json``,
    ``check --json`` and /metrics (which adds 0 for the label sets not counted yet)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True) as store:
        app = make_app(store=store, clock=SteppingClock(recent()))
        assert deliver(app) == 202
        now = time.time()
        store.record_call(CallRecord("vision", now, 0.4, phases={"ttfb": 0.3}))
        (task,) = store.claim("engine", 1, 60, now=now)
        store.bury(task.key, task.lease_token, FailureClass.AUTH, "401", now=now)
        _, families = scrape(app)
    assert main(["status", "--db", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["signals"]["totals"]
    main(["check", "--db", url, "--json"])
    check = json.loads(capsys.readouterr().out)["totals"]
    assert status["counters"] == check["counters"] and status["histograms"] == check["histograms"]
    exported = {}
    for name, rows in status["counters"].items():
        for row in rows:
            exported[("fair_" + name, tuple(sorted(row["labels"].items())))] = row["value"]
    # /metrics also exports 0 for every label set not counted yet (so increase() sees a
    # first burst); status shows what was counted: the same figures, the zeros aside
    served = {k: v for k, v in _counters(families).items()
              if k[0] not in ("fair_http_requests", "fair_webhooks")}
    assert exported == {k: v for k, v in served.items() if k in exported}
    assert all(v == 0 for k, v in served.items() if k not in exported)
    assert ("fair_dead_letters", (("cause", "AUTH"),)) in exported
    for name, rows in status["histograms"].items():
        samples = families["fair_" + name].samples
        for row in rows:
            labels = row["labels"]
            mine = [s for s in samples if {k: v for k, v in s.labels.items() if k != "le"}
                    == labels]
            assert [s.value for s in mine if s.name.endswith("_count")] == [row["count"]]
            assert [round(s.value, 6) for s in mine if s.name.endswith("_sum")] == [row["sum"]]
    assert status["counters"]["dead_letters"] == [{"labels": {"cause": "AUTH"}, "value": 1}]
