"""A real Prometheus on loopback scrapes ``fme-ai-resilience serve`` with the monitor token, evaluates
the shipped rules (deploy/prometheus/fair-rules.yml) and fires FairStall for a stall built in
the ledger."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from fme_ai_resilience.store import open_store

from helpers.processing import submission
from helpers.prometheus import RULES, SCRAPE_CONFIG, tool
from helpers.served import Served

TOKEN = "m-prometheus-7731"
PROMISE_S = 60
#: How long Prometheus may take to scrape, evaluate and fire (generous: a busy machine).
FIRE_WITHIN_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def stalled_gateway(tmp_path):
    """``serve`` over a ledger holding a stall: 3 tasks registered 5 minutes ago and nothing
    finished, against a 60 s latency promise."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True) as store:
        for i in range(3):
            store.register(submission(f"k{i}", photo=f"p{i}"), 1000, now=time.time() - 300)
    served = Served(["--db", url, "--set", f"intake.latency_promise_s={PROMISE_S}",
                     "--monitor-token-env", "FAIR_TEST_MONITOR_TOKEN"],
                    env={"FAIR_TEST_MONITOR_TOKEN": TOKEN})
    try:
        yield served
    finally:
        served.terminate()
        served.finish()


def _config(tmp_path, gateway_port: int) -> str:
    """The shipped example scrape config pointed at the gateway, scraping every second, with
    a copy of the shipped rules whose ``for:`` waits are cut to 1 s (FairStall waits a
    minute in production, more than a test should; the expressions are the shipped ones)."""
    rules = re.sub(r"(?m)^(\s*)for: \S+$", r"\1for: 1s", RULES.read_text(encoding="utf-8"))
    assert rules.count("for: 1s") == RULES.read_text(encoding="utf-8").count("for: ")
    (tmp_path / "fair-rules.yml").write_text(rules, encoding="utf-8")
    token = tmp_path / "fair-monitor-token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s",
                        "evaluation_interval": "1s"}
    config["rule_files"] = [str(tmp_path / "fair-rules.yml")]
    (job,) = config["scrape_configs"]
    job["authorization"]["credentials_file"] = str(token)
    job["static_configs"] = [{"targets": [f"127.0.0.1:{gateway_port}"]}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return str(path)


@pytest.fixture
def prometheus(tmp_path, stalled_gateway):
    """A Prometheus on a free loopback port scraping the stalled gateway; killed at the end."""
    binary = tool("prometheus")
    port = _free_port()
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen(
        [binary, f"--config.file={_config(tmp_path, stalled_gateway.port)}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait(30)
        log.close()
        print((tmp_path / "prometheus.log").read_text(encoding="utf-8")[-4000:])


def test_prometheus_scrapes_serve_and_fires_the_stall_alert(prometheus):
    """The scrape of /metrics is healthy (the token from the file accepted) and FairStall
    fires, critical, for the stall in the ledger, within a bounded wait."""
    deadline = time.monotonic() + FIRE_WITHIN_S
    firing, targets = [], []
    while time.monotonic() < deadline:
        try:
            alerts = _get(prometheus, "/api/v1/alerts")["data"]["alerts"]
            targets = _get(prometheus, "/api/v1/targets")["data"]["activeTargets"]
        except OSError:  # not listening yet
            time.sleep(0.5)
            continue
        firing = [a for a in alerts if a["labels"]["alertname"] == "FairStall"
                  and a["state"] == "firing"]
        if firing and targets and targets[0]["health"] == "up":
            break
        time.sleep(0.5)
    assert [t["health"] for t in targets] == ["up"], targets
    assert targets[0]["labels"]["job"] == "fair" and not targets[0]["lastError"]
    assert len(firing) == 1, f"FairStall not firing within {FIRE_WITHIN_S:.0f} s"
    (alert,) = firing
    assert alert["labels"]["severity"] == "critical"
    assert float(alert["value"]) >= 300 - 5  # the stall's age in seconds
    assert "Stall: work is due" in alert["annotations"]["summary"]
    names = {a["labels"]["alertname"] for a in _get(prometheus, "/api/v1/alerts")["data"]["alerts"]
             if a["state"] == "firing"}
    assert "FairGatewayDown" not in names and "FairLedgerDown" not in names, names
