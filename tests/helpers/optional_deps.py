"""Marks for tests of what an optional extra brings: they skip, saying which extra, when it is
not installed (the README's test command installs them all)."""
from __future__ import annotations

import importlib.util

import pytest

__all__ = ["needs_tenacity", "baseline_params"]

needs_tenacity = pytest.mark.skipif(
    importlib.util.find_spec("tenacity") is None,
    reason="tenacity is not installed (the drill extra: pip install -e '.[drill]')")


def baseline_params(names):
    """``names`` as pytest params, the tenacity baseline's marked :data:`needs_tenacity`."""
    return [pytest.param(n, marks=needs_tenacity) if n == "tenacity" else n for n in names]
