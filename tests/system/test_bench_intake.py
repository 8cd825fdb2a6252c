"""The intake bench runs and reports receive against register with a ratio per backend and phase."""
from __future__ import annotations

import importlib.util
import sys

from helpers import REPO


ROOT = REPO


def _load():
    spec = importlib.util.spec_from_file_location("bench_intake", ROOT / "bench" / "intake.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_intake_bench_reports_both_phases(capsys):
    """A tiny SQLite run prints new and redelivery rows with their ratio and the verdict."""
    bench = _load()
    assert bench.main(["--backends", "sqlite", "--n", "20", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| sqlite | new |" in out and "| sqlite | redelivery |" in out
    assert "x register" in out and "guard: receive <= 1.5x register for new bodies" in out


def test_bench_bodies_are_distinct_valid_webhooks():
    """Every generated body parses to its own key."""
    bench = _load()
    from fme_ai_resilience.core.intake.survey123 import parse_webhook

    keys = {parse_webhook(b)[0].idempotency_key for b in bench.bodies(50)}
    assert len(keys) == 50


def test_the_redelivery_is_context_not_target(capsys):
    """The redelivery row is printed with its explanation and never decides the verdict."""
    bench = _load()
    bench.report({"sqlite": {
        "new": {"register": 1e-4, "receive": 1.4e-4, "ratio": 1.4},
        "redelivery": {"register": 5e-5, "receive": 1e-4, "ratio": 2.0}}}, 20, 1)
    out = capsys.readouterr().out
    assert "| sqlite | redelivery |" in out and "+100 %" in out
    assert "not counted" in out and "for new bodies: met" in out
