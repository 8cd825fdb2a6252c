"""The overhead bench runs and reports every case with a ratio to its reference."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from helpers import REPO


ROOT = REPO


def _load():
    spec = importlib.util.spec_from_file_location("bench_overhead", ROOT / "bench" / "overhead.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_overhead_bench_reports_every_case(capsys):
    """A tiny run prints one row per case and the verdict against the 0.25x target."""
    for name in ("tenacity", "stamina", "backoff", "pybreaker"):
        pytest.importorskip(name, reason=f"the bench compares against {name}: "
                                         "pip install -e '.[bench]' to run it")
    bench = _load()
    assert bench.main(["--number", "50", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for comparison in bench.COMPARISONS:
        for case in comparison.cases:
            assert f"| {case.name} |" in out
    assert "x tenacity.retry (" in out
