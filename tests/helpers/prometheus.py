"""The shipped Prometheus rules and Grafana dashboard (deploy/), the names they query, the names
the gateway's ``/metrics`` serves, and Prometheus's own tools (skipped without them, failing
under ``CI=true``)."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Set

import pytest
import yaml  # PyYAML: a dependency of `responses`, in the test extra

from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.store import open_store

from helpers import REPO
from helpers.postgres import IN_CI
from helpers.processing import submission

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "fair-rules.yml"
RULE_TESTS = PROMETHEUS_DIR / "fair-rules.test.yml"
SCRAPE_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fair-dashboard.json"

#: Series Prometheus makes itself for every target, not the exporter.
PROMETHEUS_MADE = {"up"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_FAIR_NAME = re.compile(r"\b(fair_[A-Za-z0-9_]+)")
_UP = re.compile(r"\bup\s*\{")
_THRESHOLD = re.compile(r'fair_alert_threshold\s*\{[^}]*\bname\s*=\s*"([^"]+)"')


def tool(name: str) -> str:
    """The path of Prometheus's ``name`` (promtool, prometheus); skip when it is missing, or
    fail under CI, which installs Debian's ``prometheus`` package."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file()
                                   else None)
    if found:
        return found
    reason = f"{name} is not installed"
    if IN_CI:
        pytest.fail(f"CI=true needs {name} (Debian's prometheus package): {reason}",
                    pytrace=False)
    pytest.skip(f"{reason}; install it (apt-get install prometheus) to run this test")


def run(args: List[str], timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """Run a Prometheus tool; its output (stdout and stderr together) is in ``.stdout``."""
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout_s)


def rules() -> List[dict]:
    """Every rule of the shipped rules file, across its groups."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def dashboard_panels(dash: dict) -> List[dict]:
    """Every panel, those nested in collapsed rows included."""
    found = []
    for panel in dash["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def dashboard_exprs(dash: dict) -> List[str]:
    return [t["expr"] for p in dashboard_panels(dash) for t in p.get("targets", [])
            if t.get("expr")]


def as_promql(expr: str) -> str:
    """A dashboard query as Prometheus reads it: Grafana's variables replaced by values."""
    return (expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
            .replace("$__range", "1h").replace("${instance}", ".*").replace("$instance", ".*"))


def metric_names(expr: str) -> Set[str]:
    """The metric names a PromQL expression reads (label values and strings left out)."""
    bare = _STRING.sub('""', expr)
    names = set(_FAIR_NAME.findall(bare))
    if _UP.search(bare):
        names.add("up")
    return names


def threshold_names(expr: str) -> Set[str]:
    """The ``name`` labels of ``fair_alert_threshold`` an expression compares against."""
    return set(_THRESHOLD.findall(expr))


def served_names(text: str) -> Set[str]:
    """Every series name the exposition ``text`` serves or declares: its samples, and for
    each ``# TYPE`` the names of that family (``_bucket``/``_sum``/``_count`` of a histogram,
    ``_total`` of a counter), so a family with no sample yet still counts."""
    names: Set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            names.add(name)
            if kind == "histogram":
                names.update(name + s for s in ("_bucket", "_sum", "_count"))
            elif kind == "counter" and not name.endswith("_total"):
                names.add(name + "_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def served_thresholds(text: str) -> Set[str]:
    return set(re.findall(r'^fair_alert_threshold\{[^}]*name="([^"]+)"', text, re.M))


def exporter_text(tmp_path: Path) -> str:
    """The gateway's ``/metrics`` over a ledger with some of everything: work due past the
    promise, a task finished, a dead letter, a junk body kept as evidence."""
    url = f"sqlite:///{tmp_path / 'exported.db'}"
    now = time.time()
    with open_store(url, init_schema=True) as store:
        for i in range(4):
            store.register(submission(f"k{i}", photo=f"p{i}"), 1000, now=now - 600)
        first, second = store.claim("engine", 2, 60.0, now=now - 500)
        store.bury(first.key, first.lease_token, FailureClass.NOT_FOUND, "HTTP 404",
                   now=now - 450)
        store.record_dead_letter("body:0", {"raw": "junk"}, FailureClass.INVALID_PAYLOAD,
                                 "not JSON", now=now - 30)
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                   "wsgi.input": io.BytesIO(b"")}
        seen: Dict[str, str] = {}
        body = b"".join(make_app(store=store)(environ,
                                               lambda status, hdrs: seen.update(status=status)))
    assert seen["status"].startswith("200"), seen
    return body.decode("utf-8")


def check_exprs(exprs: List[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """``promtool check rules`` over the expressions as recording rules: Prometheus's own
    parser reads each one (promtool has no expression checker of its own)."""
    recorded = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(recorded, sort_keys=False), encoding="utf-8")
    return run([tool("promtool"), "check", "rules", str(path)])
