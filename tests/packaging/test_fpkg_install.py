"""The FME Package built by ``package build``: its content, and its wheels installed with
``pip install --target`` into fresh Python 3.9 and 3.13 folders outside the checkout, where
the callers run webhook -> processor -> compensator with the pure PostgreSQL driver.

The dependency wheels come from ``$FAIR_TEST_WHEELHOUSE`` when set (CI builds one), else pip
fetches them from the package index, as the wheel tests' builds do. "FME's own" requests and
urllib3 are installed beside, in a folder of their own, as FME bundles them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fme_ai_resilience.cli.package import build_package

#: They build from the checkout: one worker builds at a time.

from helpers.postgres import IN_CI
from helpers import REPO, script


pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("build")]

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
SCRIPT = Path(script("fpkg_pipeline.py"))


@pytest.fixture(scope="module")
def fpkg(tmp_path_factory):
    out = tmp_path_factory.mktemp("fpkg")
    return build_package(out, wheelhouse=os.environ.get("FAIR_TEST_WHEELHOUSE") or None)


@pytest.fixture(scope="module")
def wheels(fpkg, tmp_path_factory):
    target = tmp_path_factory.mktemp("wheels")
    with zipfile.ZipFile(fpkg) as archive:
        for name in archive.namelist():
            if name.startswith("python/") and name.endswith(".whl"):
                (target / Path(name).name).write_bytes(archive.read(name))
    return sorted(target.glob("*.whl"))


def test_the_package_holds_the_transformers_the_help_and_only_pure_wheels(fpkg):
    """package.yml lists the three transformers and every wheel; each transformer has its
    .fmxj and help page; no wheel is compiled or holds a compiled file, none is FME's own."""
    with zipfile.ZipFile(fpkg) as archive:
        names = archive.namelist()
        manifest = archive.read("package.yml").decode("utf-8")
        nested = [n for w in names if w.endswith(".whl")
                  for n in zipfile.ZipFile(archive.open(w)).namelist()]
    assert {"package.yml", "README.md", "CHANGES.md", "icon.png"} <= set(names)
    for name in ("FairIntake", "FairProcessor", "FairCompensator"):
        assert f"transformers/{name}.fmxj" in names and f"transformers/{name}.md" in names
        assert f"- name: {name}" in manifest
    wheel_names = [Path(n).name for n in names if n.startswith("python/")]
    assert all(w.endswith("-none-any.whl") for w in wheel_names)
    assert {w.split("-")[0] for w in wheel_names} >= {"fme_ai_resilience", "jsonschema",
                                                       "pg8000", "attrs", "pyrsistent"}
    assert not {w.split("-")[0] for w in wheel_names} & {"requests", "urllib3", "certifi"}
    assert all(f"- name: {w.split('-')[0]}" in manifest for w in wheel_names)
    assert not [n for n in nested if n.endswith((".so", ".pyd", ".dll", ".dylib"))]
    assert any(w.startswith("jsonschema-4.17.3-") for w in wheel_names)


def _interpreter(version: str) -> Path:
    found = sorted(PYENV.glob(f"{version}.*/bin/python"))
    if not found:
        if IN_CI:
            pytest.fail(f"no Python {version} under {PYENV}", pytrace=False)
        pytest.skip(f"no Python {version} under {PYENV}")
    return found[-1]


@pytest.mark.parametrize("version", ["3.9", "3.13"])
def test_the_callers_run_from_the_installed_wheels(version, wheels, pg_url, tmp_path):
    """From a --target folder of the package's wheels (nothing compiled there) and FME's own
    requests beside it: three webhooks registered, two photos analysed once each and written
    to the layer, the gone one a NOT_FOUND dead letter, the compensator's report done; the
    ledger on PostgreSQL through pg8000."""
    python = _interpreter(version)
    plugins = tmp_path / "Plugins" / "Python" / f"python{version.replace('.', '')}"
    bundled = tmp_path / "fme-bundled"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(plugins), *map(str, wheels)], check=True,
                   capture_output=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--target", str(bundled),
                    "requests"], check=True, capture_output=True)
    compiled = [p for p in plugins.rglob("*") if p.suffix in (".so", ".pyd", ".dll")]
    assert compiled == []
    script = tmp_path / "run.py"
    shutil.copy(SCRIPT, script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FAIR_"))}
    env["FAIR_TEST_LEDGER"] = pg_url
    done = subprocess.run([str(python), "-s", str(script), str(plugins), str(bundled)],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
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
    naming it, and no .fpkg in --out."""
    from fme_ai_resilience.cli import main

    house = tmp_path / "house"
    house.mkdir()
    with zipfile.ZipFile(house / wheel, "w") as archive:
        archive.writestr(member, b"\x7fELF")
    out = tmp_path / "out"
    assert main(["package", "build", "--out", str(out), "--wheelhouse", str(house)]) == 1
    assert wheel in capsys.readouterr().err
    assert not list(out.glob("*.fpkg")) if out.exists() else True


def test_files_left_in_the_checkout_s_build_folder_stay_out_of_the_wheel(tmp_path, fpkg):
    """A module left in build/lib by an earlier build (one since renamed or deleted) is not
    packed into the library's wheel: the wheel is built from the tracked sources only."""
    root = REPO
    checkout = tmp_path / "checkout"
    shutil.copytree(root, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__"))
    stale = checkout / "build" / "lib" / "fme_ai_resilience" / "stale_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("LEFT_OVER = True\n")
    house = tmp_path / "house"
    house.mkdir()
    with zipfile.ZipFile(fpkg) as archive:   # the dependency wheels of the package built above
        for name in archive.namelist():
            if name.startswith("python/") and not name.startswith("python/fme_ai_resilience"):
                (house / Path(name).name).write_bytes(archive.read(name))
    built = build_package(tmp_path / "out", source=str(checkout), wheelhouse=str(house))
    with zipfile.ZipFile(built) as archive:
        (wheel,) = [n for n in archive.namelist() if n.startswith("python/fme_ai_resilience")]
        members = zipfile.ZipFile(archive.open(wheel)).namelist()
    assert "fme_ai_resilience/fme/caller_base.py" in members
    assert not [m for m in members if m.endswith("stale_module.py")]


def test_a_library_wheel_in_the_wheelhouse_does_not_replace_the_one_built(tmp_path, fpkg):
    """A wheelhouse made with ``pip wheel -w DIR .`` holds a library wheel of its own (an older
    one, say): the package keeps only the wheel built from the checkout, listed once."""
    house = tmp_path / "house"
    house.mkdir()
    with zipfile.ZipFile(fpkg) as archive:
        for name in archive.namelist():
            if name.startswith("python/") and name.endswith(".whl"):
                (house / Path(name).name).write_bytes(archive.read(name))
    with zipfile.ZipFile(house / "fme_ai_resilience-0.0.1-py3-none-any.whl", "w") as old:
        old.writestr("fme_ai_resilience/__init__.py", "__version__ = '0.0.1'\n")
    built = build_package(tmp_path / "out", wheelhouse=str(house))
    with zipfile.ZipFile(built) as archive:
        wheels = [n for n in archive.namelist() if n.startswith("python/fme_ai_resilience")]
        manifest = archive.read("package.yml").decode("utf-8")
    assert wheels == [f"python/fme_ai_resilience-{fpkg.name.split('-')[-1][:-5]}"
                      "-py3-none-any.whl"]
    assert manifest.count("- name: fme_ai_resilience\n") == 1
