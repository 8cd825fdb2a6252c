"""What importing the package costs: ``python -X importtime``, in fresh interpreters.

Run: ``.venv/bin/python bench/import_time.py`` (about 5 s). Writes nothing but stdout.

FME imports the package in every translation that uses a PythonCaller, so ``import
fme_ai_resilience`` must stay cheap; the names a user needs load lazily on first use. Each
statement below is run in ``--runs`` fresh interpreters with ``-X importtime`` and the median
cumulative microseconds of the package's own top-level entry (what the statement added on top
of the interpreter's start) is reported, beside the bare interpreter start (``pass``) for
scale. Guard: ``import fme_ai_resilience`` costs at most 50 ms.
"""
from __future__ import annotations

import argparse
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
GUARD_MS = 50.0
STATEMENTS = (
    "import fme_ai_resilience",
    "from fme_ai_resilience import VisionClient",
    "from fme_ai_resilience import open_store, decide",
    "import fme_ai_resilience.gateway",
)
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$")


def cost_us(statement: str) -> int:
    """Microseconds the statement's imports took in one fresh interpreter (``-X importtime``:
    the sum of the cumulative times of its top-level imports)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    before = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    start_up = {m.group(4) for m in map(_LINE.match, before.stderr.splitlines()) if m}
    total = 0
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        # top-level entries only (no indentation), minus what the bare interpreter loads anyway
        if match and match.group(3) == " " and match.group(4) not in start_up:
            total += int(match.group(2))
    return total


def measure(runs: int) -> Dict[str, List[int]]:
    return {s: [cost_us(s) for _ in range(runs)] for s in STATEMENTS}


def report(results: Dict[str, List[int]], runs: int) -> bool:
    print(f"Import cost — median of {runs} fresh interpreters, -X importtime; CPython "
          f"{platform.python_version()}, {platform.system()} {platform.machine()}")
    print()
    print("| statement | median (ms) | min (ms) | max (ms) |")
    print("| --- | ---: | ---: | ---: |")
    for statement, samples in results.items():
        print(f"| `{statement}` | {statistics.median(samples) / 1000:.1f} | "
              f"{min(samples) / 1000:.1f} | {max(samples) / 1000:.1f} |")
    package = statistics.median(results[STATEMENTS[0]]) / 1000
    ok = package <= GUARD_MS
    print()
    print(f"guard: `import fme_ai_resilience` <= {GUARD_MS:g} ms: {package:.1f} ms, "
          f"{'met' if ok else 'NOT met'}")
    return ok


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per statement")
    args = parser.parse_args(argv)
    report(measure(args.runs), args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
