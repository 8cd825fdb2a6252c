"""The import-time bench runs and reports each statement with the package's guard."""
from __future__ import annotations

import importlib.util
import sys

from helpers import REPO


ROOT = REPO


def test_import_time_bench_reports_every_statement(capsys):
    """A one-run pass prints a row per statement and the verdict against the 50 ms guard."""
    spec = importlib.util.spec_from_file_location("bench_import_time",
                                                  ROOT / "bench" / "import_time.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    assert bench.main(["--runs", "1"]) == 0
    out = capsys.readouterr().out
    for statement in bench.STATEMENTS:
        assert f"| `{statement}` |" in out
    assert "guard: `import fme_ai_resilience` <= 50 ms" in out
