"""The FME Package built by ``package build`` (Safe's ``fme-packager pack``): its content, and
its wheels installed with ``pip install --target`` into fresh Python 3.9 and 3.13 folders
outside the checkout, where the callers run webhook -> processor -> compensator with the pure
PostgreSQL driver, every call through a forward proxy on loopback, inside a stand-in FME
whose network session is the package's own copy of Safe's fmetools.

The dependency wheels come from ``$FAIR_TEST_WHEELHOUSE`` when set (CI builds one), else pip
fetches them from the package index at the pinned versions. "FME's own" requests, urllib3
and pypac are installed beside, in a folder of their own, as FME bundles them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fme_ai_resilience.cli.package import build_package, stage_package

#: They build from the checkout: one worker builds at a time.

from helpers.postgres import IN_CI
from helpers import REPO, script
from helpers.wheelhouse import house  # noqa: F401 (a fixture)
from helpers.forward_proxy import ForwardProxy


pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("build")]

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
SCRIPT = Path(script("fpkg_pipeline.py"))
ROOT = REPO


@pytest.fixture(scope="module")
def fpkg(tmp_path_factory, house):
    if importlib.util.find_spec("fme_packager") is None:
        if IN_CI and sys.version_info >= (3, 10):
            pytest.fail("fme-packager is not installed: pip install -e '.[package]'",
                        pytrace=False)
        pytest.skip("Safe's fme-packager is not installed here (the package extra, "
                    "Python 3.10+)")
    out = tmp_path_factory.mktemp("fpkg")
    return build_package(out, wheelhouse=str(house))


@pytest.fixture(scope="module")
def wheels(fpkg, tmp_path_factory):
    target = tmp_path_factory.mktemp("wheels")
    with zipfile.ZipFile(fpkg) as archive:
        for name in archive.namelist():
            if name.startswith("python/") and name.endswith(".whl"):
                (target / Path(name).name).write_bytes(archive.read(name))
    return sorted(target.glob("*.whl"))


def test_the_package_holds_the_transformers_the_help_and_only_pinned_pure_wheels(fpkg):
    """package.yml lists the three transformers and every wheel; each transformer has its
    .fmxj and Quick Add text, its help page is HTML in help/ (made by fme-packager pack)
    beside the sample workspace; every wheel is pure and at its pinned version, none FME's
    own and no waitress; fmetools is inside the library's wheel, its licence with it."""
    from fme_ai_resilience.core.fme import fpkg as core

    pins = core.pinned_versions((ROOT / core.CONSTRAINTS_FILE).read_text(encoding="utf-8"))
    with zipfile.ZipFile(fpkg) as archive:
        names = archive.namelist()
        manifest = archive.read("package.yml").decode("utf-8")
        index = archive.read("help/package_help.csv").decode("utf-8")
        nested = {w: zipfile.ZipFile(archive.open(w)).namelist()
                  for w in names if w.endswith(".whl")}
    assert {"package.yml", "README.md", "CHANGES.md", "icon.png",
            "help/fme-ai-resilience-sample.fmw"} <= set(names)
    assert "minimum_fme_build: 24145" in manifest
    for name in ("FairIntake", "FairProcessor", "FairCompensator"):
        assert f"transformers/{name}.fmxj" in names and f"transformers/{name}.md" in names
        assert f"help/{name}.htm" in names and f"fmx_fair_fme-ai-resilience_{name}" in index
        assert f"- name: {name}" in manifest
    wheel_names = [Path(n).name for n in names if n.startswith("python/") and n.endswith(".whl")]
    assert all(w.endswith("-none-any.whl") for w in wheel_names)
    assert {w.split("-")[0] for w in wheel_names} >= {"fme_ai_resilience", "jsonschema",
                                                       "pg8000", "attrs", "pyrsistent"}
    assert not {w.split("-")[0] for w in wheel_names} & {"requests", "urllib3", "certifi",
                                                         "waitress", "fmetools", "pypac"}
    for wheel in wheel_names:
        if not wheel.startswith("fme_ai_resilience-"):
            assert pins[core.canonical_name(wheel.split("-")[0])] == wheel.split("-")[1]
    assert all(f"- name: {w.split('-')[0]}" in manifest for w in wheel_names)
    assert not [n for members in nested.values() for n in members
                if n.endswith((".so", ".pyd", ".dll", ".dylib"))]
    (library,) = [w for w in nested if "fme_ai_resilience-" in w]
    assert {"fme_ai_resilience/_vendor/fmetools/http.py",
            "fme_ai_resilience/_vendor/fmetools/LICENSE"} <= set(nested[library])


def _interpreter(version: str) -> Path:
    found = sorted(PYENV.glob(f"{version}.*/bin/python"))
    if not found:
        if IN_CI:
            pytest.fail(f"no Python {version} under {PYENV}", pytrace=False)
        pytest.skip(f"no Python {version} under {PYENV}")
    return found[-1]


@pytest.mark.parametrize("version", ["3.9", "3.13"])
def test_the_callers_run_from_the_installed_wheels_through_fmes_proxy(version, wheels, pg_url,
                                                                      tmp_path):
    """From a --target folder of the package's wheels (nothing compiled there) and FME's own
    requests and pypac beside it, with FME's proxy set: three webhooks registered, two
    photos analysed once each and written to the layer, the gone one a NOT_FOUND dead letter,
    the compensator's report done; the ledger on PostgreSQL through pg8000; every call to the
    Vision AI, the photo host and the layer went through the proxy on FME's own
    FMERequestsSession (the package's fmetools), and nothing WARNed about it."""
    python = _interpreter(version)
    plugins = tmp_path / "Plugins" / "Python" / f"python{version.replace('.', '')}"
    bundled = tmp_path / "fme-bundled"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(plugins), *map(str, wheels)], check=True,
                   capture_output=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--target", str(bundled),
                    "requests", "pypac"], check=True, capture_output=True)
    compiled = [p for p in plugins.rglob("*") if p.suffix in (".so", ".pyd", ".dll")]
    assert compiled == []
    script = tmp_path / "run.py"
    shutil.copy(SCRIPT, script)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "FAIR_")) and "proxy" not in k.lower()}
    env["FAIR_TEST_LEDGER"] = pg_url
    with ForwardProxy() as proxy:
        env["HTTP_PROXY"] = env["HTTPS_PROXY"] = proxy.url
        done = subprocess.run([str(python), "-s", str(script), str(plugins), str(bundled)],
                              cwd=tmp_path, env=env, text=True, capture_output=True,
                              timeout=300)
        carried = Counter(urlsplit(entry.split(" ", 1)[1]).port for entry in proxy.seen)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    served = {int(port): n for port, n in seen["served"].items()}
    assert all(served.values()) and dict(carried) == served, (carried, served)
    (first,) = [line for line in seen["lines"]
                if line.startswith("fme-ai-resilience WS-02_processor: fme-ai-resilience ")]
    assert "HTTP through FME's FMERequestsSession (fmetools " in first and "vendored" in first
    assert f"FMERequestsSession: Using proxy {proxy.url}" in seen["lines"]  # fmetools' own
    assert not [w for w in seen["warnings"] if "network session" in w]
    assert seen["library"].startswith(str(plugins)) and seen["jsonschema"].startswith(
        str(plugins)) and seen["requests"].startswith(str(bundled))
    assert (seen["driver"], seen["jsonschema_version"]) == ("pg8000", "4.17.3")
    assert seen["registered"] == [202, 202, 202]
    assert seen["succeeded"] == ["SUCCEEDED", "SUCCEEDED"]
    assert seen["rejected"] == ["NOT_FOUND"]
    assert seen["written"][:2] == seen["truths"] and seen["written"][2] is None
    assert seen["analysed"] == [1, 1]
    assert seen["report"] == ["DONE", 1]


@pytest.mark.parametrize("wheel, member", [
    ("rpds_py-0.20.0-cp39-cp39-manylinux_2_17_x86_64.whl", "rpds/rpds.py"),
    ("sneaky-1.0-py3-none-any.whl", "sneaky/_speed.cpython-39-x86_64-linux-gnu.so"),
])
def test_a_compiled_dependency_stops_the_build_and_writes_nothing(wheel, member, tmp_path,
                                                                  capsys):
    """A platform wheel, or a "pure" one holding a shared library, in the wheelhouse: exit 1
    naming it, and nothing written to --out (staged or packed)."""
    from fme_ai_resilience.cli import main

    house = tmp_path / "house"
    house.mkdir()
    with zipfile.ZipFile(house / wheel, "w") as archive:
        archive.writestr(member, b"\x7fELF")
    out = tmp_path / "out"
    assert main(["package", "stage", "--out", str(out), "--wheelhouse", str(house)]) == 1
    assert wheel in capsys.readouterr().err
    assert not out.exists()


def test_a_dependency_at_another_version_than_pinned_stops_the_build(tmp_path, house, capsys):
    """A wheelhouse holding pg8000 at a version fpkg-constraints.txt does not pin: exit 1
    naming the wheel and the pin, nothing staged."""
    from fme_ai_resilience.cli import main

    other = tmp_path / "house"
    shutil.copytree(house, other)
    (real,) = other.glob("pg8000-*.whl")
    real.rename(real.with_name("pg8000-1.29.0-py3-none-any.whl"))
    out = tmp_path / "out"
    assert main(["package", "stage", "--out", str(out), "--wheelhouse", str(other)]) == 1
    err = capsys.readouterr().err
    assert "pg8000-1.29.0-py3-none-any.whl" in err and "fpkg-constraints.txt pins" in err
    assert not out.exists()


def test_files_left_in_the_checkout_s_build_folder_stay_out_of_the_wheel(tmp_path, fpkg,
                                                                         house):
    """A module left in build/lib by an earlier build (one since renamed or deleted) is not
    packed into the library's wheel: the wheel is built from the tracked sources only. (The
    staged package is what ``fme-packager pack`` zips as it is.)"""
    root = REPO
    checkout = tmp_path / "checkout"
    shutil.copytree(root, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".venv-*", ".git", "build", "dist", "*.egg-info", "__pycache__"))
    stale = checkout / "build" / "lib" / "fme_ai_resilience" / "stale_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("LEFT_OVER = True\n")
    staged = stage_package(tmp_path / "stage", source=str(checkout), wheelhouse=str(house))
    (wheel,) = (staged / "python").glob("fme_ai_resilience-*.whl")
    members = zipfile.ZipFile(wheel).namelist()
    assert "fme_ai_resilience/fme/caller_base.py" in members
    assert not [m for m in members if m.endswith("stale_module.py")]


def test_a_library_wheel_in_the_wheelhouse_does_not_replace_the_one_built(tmp_path, fpkg,
                                                                          house):
    """A wheelhouse made with ``pip wheel -w DIR .`` holds a library wheel of its own (an older
    one, say): the package keeps only the wheel built from the checkout, listed once (in the
    staged package ``fme-packager pack`` zips as it is)."""
    mixed = tmp_path / "house"
    shutil.copytree(house, mixed)
    with zipfile.ZipFile(mixed / "fme_ai_resilience-0.0.1-py3-none-any.whl", "w") as old:
        old.writestr("fme_ai_resilience/__init__.py", "__version__ = '0.0.1'\n")
    staged = stage_package(tmp_path / "stage", wheelhouse=str(mixed))
    wheels = [f"python/{w.name}" for w in (staged / "python").glob("fme_ai_resilience*")]
    manifest = (staged / "package.yml").read_text(encoding="utf-8")
    assert wheels == [f"python/fme_ai_resilience-{fpkg.name.split('-')[-1][:-5]}"
                      "-py3-none-any.whl"]
    assert manifest.count("- name: fme_ai_resilience\n") == 1
