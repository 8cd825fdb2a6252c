"""The library's wheel in the FME Package asks for nothing the package does not bring or FME
does not ship: an installer that resolves the wheels' requirements offline (FME downloads
nothing) finds every one."""
from __future__ import annotations

import re
import zipfile
from email.parser import Parser

import pytest

from fme_ai_resilience.cli.package import stage_package
from fme_ai_resilience.core.fme import fpkg as core

from helpers.wheelhouse import house  # noqa: F401 (a fixture)


pytestmark = [pytest.mark.xdist_group("build")]


def test_the_library_wheel_requires_only_what_the_package_or_fme_brings(tmp_path, house):
    """Every unconditional Requires-Dist of the library's wheel is a wheel beside it or one
    of FME's own (requests, urllib3 ...): no waitress, which the package leaves out."""
    staged = stage_package(tmp_path / "stage", wheelhouse=str(house))
    (wheel,) = (staged / "python").glob("fme_ai_resilience-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(meta).decode("utf-8"))
    required = {core.canonical_name(re.split(r"[ <>=!~;\[(]", r, maxsplit=1)[0])
                for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r}
    shipped = {core.canonical_name(core.wheel_distribution(w.name))
               for w in (staged / "python").glob("*.whl")}
    assert "waitress" not in required
    assert required <= shipped | {core.canonical_name(n) for n in core.LEFT_TO_FME}, required
