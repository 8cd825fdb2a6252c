"""The shipped Grafana dashboard (deploy/grafana/fair-dashboard.json): a dashboard Grafana
imports, its every query one Prometheus parses and naming only metrics the gateway serves."""
from __future__ import annotations

from helpers.prometheus import (DASHBOARD, PROMETHEUS_MADE, as_promql, check_exprs, dashboard,
                                dashboard_exprs, dashboard_panels, exporter_text, metric_names,
                                served_names, served_thresholds, threshold_names)

#: The golden signals and the pipeline's own figures, each with a panel of its own.
HISTOGRAMS = ("fair_intake_latency_seconds_bucket", "fair_ai_call_duration_seconds_bucket",
              "fair_end_to_end_seconds_bucket")
SIGNALS = ("fair_webhooks_total", "fair_ai_calls_total", "fair_tasks_completed_total",
           "fair_format_anomalies_total", "fair_backlog", "fair_watermark",
           "fair_stalled_seconds", "fair_dead_letters_total", "fair_review_queue",
           "fair_breaker_state", "fair_degradation_level", "fair_degradation_held",
           "fair_alert_level")


def test_the_dashboard_is_grafana_dashboard_json():
    """Valid JSON with the keys Grafana's import needs, a recent schema, a Prometheus data
    source variable every panel queries through, and unique panel ids on a 24-column grid."""
    dash = dashboard()
    assert DASHBOARD.read_text(encoding="utf-8").endswith("}\n")
    for key in ("title", "uid", "schemaVersion", "panels", "templating", "time"):
        assert key in dash, key
    assert dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = dashboard_panels(dash)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and panel["title"] and panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_the_dashboard_shows_the_golden_signals():
    """Latency as percentiles of the histograms, traffic and errors as rates of the counters,
    and a panel for saturation, dead letters, review, breaker, ladder and the alert level."""
    exprs = dashboard_exprs(dashboard())
    for histogram in HISTOGRAMS:
        assert any("histogram_quantile" in e and histogram in e for e in exprs), histogram
    for name in SIGNALS:
        assert any(name in metric_names(e) for e in exprs), name
    for expr in exprs:
        for name in metric_names(expr):
            if name.endswith("_total"):
                assert "rate(" in expr or "increase(" in expr, expr  # a counter's raw value says little


def test_every_dashboard_query_parses(tmp_path):
    """Prometheus's parser reads every query (Grafana's variables given values), through
    `promtool check rules` on them as recording rules."""
    exprs = [as_promql(e) for e in dashboard_exprs(dashboard())]
    assert all("$" not in e for e in exprs), [e for e in exprs if "$" in e]
    done = check_exprs(exprs, tmp_path)
    assert done.returncode == 0 and f"SUCCESS: {len(exprs)} rules found" in done.stdout, \
        done.stdout


def test_a_query_prometheus_cannot_parse_is_caught(tmp_path):
    """The parse check can fail: an unbalanced query is refused."""
    done = check_exprs(["sum(rate(fair_webhooks_total[5m])"], tmp_path)
    assert done.returncode != 0


def test_every_dashboard_query_names_a_served_metric(tmp_path):
    """The names the dashboard queries are names the gateway's /metrics serves (or `up`,
    which Prometheus makes), thresholds included."""
    text = exporter_text(tmp_path)
    exprs = dashboard_exprs(dashboard())
    read = set().union(*(metric_names(e) for e in exprs))
    assert read - (served_names(text) | PROMETHEUS_MADE) == set()
    wanted = set().union(*(threshold_names(e) for e in exprs))
    assert wanted - served_thresholds(text) == set()
