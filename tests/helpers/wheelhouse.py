"""The FME Package's pinned dependency wheels, fetched once per test session."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fme_ai_resilience.core.fme import fpkg

from helpers import REPO


@pytest.fixture(scope="session")
def house(tmp_path_factory):
    """The pinned dependency wheels (fmetools among them): $FAIR_TEST_WHEELHOUSE, or pip's."""
    given = os.environ.get("FAIR_TEST_WHEELHOUSE")
    if given:
        return Path(given)
    target = tmp_path_factory.mktemp("house")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:",
                    "--platform", "any", "--implementation", "py", "--abi", "none",
                    "--python-version", "3.9", "-d", str(target), "-c",
                    str(REPO / fpkg.CONSTRAINTS_FILE), *fpkg.PURE_REQUIREMENTS,
                    *fpkg.VENDORED], check=True, capture_output=True)
    return target
