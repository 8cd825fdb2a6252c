"""Where the real saved workspaces are: shared/reference/fme-workspaces/ beside the checkout.

They are reference material, read in tests and never copied into the project. The folder sits
outside the repository (``../shared`` from /work/main, ``../../shared`` from a worktree), so it
is looked for in every parent of the checkout, or taken from ``FAIR_FME_WORKSPACES``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List, Optional

import pytest

from helpers import REPO


ROOT = REPO


def reference_dir() -> Optional[Path]:
    """The folder of real .fmw files, or None when this machine has none."""
    given = os.environ.get("FAIR_FME_WORKSPACES")
    if given:
        return Path(given)
    for parent in ROOT.parents:
        candidate = parent / "shared" / "reference" / "fme-workspaces"
        if candidate.is_dir():
            return candidate
    return None


def reference_files() -> List[Path]:
    """Every real .fmw with a top-level PythonCaller (empty when the folder is missing)."""
    folder = reference_dir()
    if folder is None:
        return []
    return sorted(p for p in folder.glob("*.fmw")
                  if 'TYPE="PythonCaller"' in p.read_text(encoding="utf-8"))


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def require_reference() -> List[Path]:
    files = reference_files()
    if not files:
        pytest.skip("shared/reference/fme-workspaces/ is not on this machine; set "
                    "FAIR_FME_WORKSPACES to its path")
    return files


def python_sources(text: str) -> List[str]:
    """The header copies of every PythonCaller script, XML-unescaped (still FME-encoded)."""
    import html

    return [html.unescape(m.group(1))
            for m in re.finditer(r'PARM_NAME="PYTHONSOURCE" PARM_VALUE="([^"]*)"', text)]
