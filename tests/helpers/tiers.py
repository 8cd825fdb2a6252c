"""The tiers of the suite: each folder's ``conftest.py`` marks the tests below it."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List

import pytest

#: Each tier, in the order a run starts them (the longest first, so no worker idles at the end).
TIERS = ("system", "packaging", "reliability", "integration", "docs", "contract", "unit")


def marking(conftest: str) -> Callable[[List[pytest.Item]], None]:
    """The ``pytest_collection_modifyitems`` of the conftest at ``conftest``: the tests of its
    folder get the folder's tier as a marker."""
    folder = Path(conftest).resolve().parent
    tier = folder.name
    assert tier in TIERS, f"{folder} is no tier of the suite ({', '.join(TIERS)})"
    marker = getattr(pytest.mark, tier)

    def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
        for item in items:
            if folder in Path(item.path).resolve().parents:
                item.add_marker(marker)

    return pytest_collection_modifyitems
