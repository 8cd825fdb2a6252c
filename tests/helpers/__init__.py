"""What the tests share: stand-ins, worker scripts, fixtures and paths (``from helpers.x import
y``; pytest puts ``tests/`` on the path through its ``conftest.py``)."""
from __future__ import annotations

from pathlib import Path

#: The checkout: the repository's root.
REPO = Path(__file__).resolve().parents[2]
#: The sample webhook bodies.
DATA = REPO / "tests" / "data"
#: This folder, where the worker scripts the tests start as processes live.
HERE = Path(__file__).resolve().parent


def script(name: str) -> str:
    """The path of a worker script of this folder, for ``python SCRIPT ...``."""
    return str(HERE / name)
