"""The shipped Prometheus rules (deploy/prometheus/): promtool accepts them and their unit tests
pass, every metric they read is one the gateway's ``/metrics`` serves, each alert carries what
an operator needs, and the example scrape config is one Prometheus loads."""
from __future__ import annotations

import re

import yaml

from helpers import REPO
from helpers.prometheus import (RULE_TESTS, RULES, SCRAPE_CONFIG, PROMETHEUS_MADE, exporter_text,
                                metric_names, rules, run, served_names, served_thresholds,
                                threshold_names, tool)

#: The pages of `check` (docs/observability.md, "The alerts") each rule stands for.
CHECK_ALERTS = {"FairStall", "FairOverdue", "FairDeadLetters", "FairJunkDeliveries",
                "FairLeasesNotRenewed", "FairReviewQueueOld", "FairFormatAnomalies",
                "FairAuthErrors", "FairBacklog", "FairEndToEndSlow", "FairBreakerOpenLong",
                "FairLadderHeld"}


def test_promtool_accepts_the_rules():
    """`promtool check rules` reads the shipped rules file without an error."""
    done = run([tool("promtool"), "check", "rules", str(RULES)])
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout


def test_the_rules_unit_tests_pass():
    """`promtool test rules`: each alert fires on the series that should fire it and on no
    other (the test file lists every alert expected at each evaluation)."""
    done = run([tool("promtool"), "test", "rules", str(RULE_TESTS)])
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout


def test_the_rules_unit_tests_cover_every_alert():
    """Every alert of the rules file is expected to fire in at least one unit test."""
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"]
             if case.get("exp_alerts")}
    assert {r["alert"] for r in rules()} <= fired


def test_a_broken_rule_fails_its_unit_test(tmp_path):
    """The unit tests can fail: the junk-delivery alert at one body instead of five makes
    `promtool test rules` report the stray junk body that must not page."""
    broken = RULES.read_text(encoding="utf-8").replace("[15m]) >= 5", "[15m]) >= 1")
    assert broken != RULES.read_text(encoding="utf-8")
    (tmp_path / RULES.name).write_text(broken, encoding="utf-8")
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text(encoding="utf-8"),
                                             encoding="utf-8")
    done = run([tool("promtool"), "test", "rules", str(tmp_path / RULE_TESTS.name)])
    assert done.returncode != 0 and "FairJunkDeliveries" in done.stdout, done.stdout


def test_every_alert_says_how_bad_and_what_to_do():
    """Each alert waits (`for:`), carries severity warning or critical, and a summary and a
    description that names a command or a setting to act on."""
    for rule in rules():
        name = rule["alert"]
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        notes = rule["annotations"]
        assert notes["summary"].strip() and notes["description"].strip(), name
        assert re.search(r"fme-ai-resilience |intake\.|alerts\.|systemctl", notes["description"]), \
            name
    assert CHECK_ALERTS <= {r["alert"] for r in rules()}


def test_every_metric_the_rules_read_is_served(tmp_path):
    """The names in the rules are names the gateway's /metrics serves (a renamed metric would
    silence its alert), and every threshold they compare against is exported."""
    text = exporter_text(tmp_path)
    served = served_names(text) | PROMETHEUS_MADE
    read = set().union(*(metric_names(r["expr"]) for r in rules()))
    assert read and read - served == set()
    wanted = set().union(*(threshold_names(r["expr"]) for r in rules()))
    assert wanted and wanted - served_thresholds(text) == set()


def test_the_example_scrape_config_loads_with_the_rules(tmp_path):
    """`promtool check config` accepts deploy/prometheus/prometheus.yml (given a token file
    where it names one) and the rules file it loads."""
    token = tmp_path / "fair-monitor-token"
    token.write_text("m-7731\n", encoding="utf-8")
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "fair"  # the job FairGatewayDown reads
    assert job["authorization"]["credentials_file"]
    job["authorization"]["credentials_file"] = str(token)
    config["rule_files"] = [str(RULES)]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    done = run([tool("promtool"), "check", "config", str(path)])
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout


def test_the_docs_list_every_alert():
    """docs/observability.md's "Alerts in Prometheus" names every alert the rules define."""
    doc = (REPO / "docs" / "observability.md").read_text(encoding="utf-8")
    section = doc.split("## Alerts in Prometheus", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(Fair\w+)` \|", section, re.M))
    assert listed == {r["alert"] for r in rules()}
