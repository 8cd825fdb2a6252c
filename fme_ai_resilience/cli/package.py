"""``fme-ai-resilience package build``: the FME Package (``.fpkg``) in one command.

It writes ``package.yml``, README, CHANGES, the icon, the three transformers with their help
pages (:mod:`fme_ai_resilience.core.fme.fpkg`) and ``python/``: the library's wheel, built with pip
from a copy of the checkout without its build folders (nothing an earlier build left), and
its dependencies as pure-Python wheels, from ``--wheelhouse`` or downloaded by pip
(``--only-binary :all:`` for the ``any`` platform, so nothing compiled can come). Every
wheel is checked: its tags say ``none-any`` and it holds no compiled file; one that fails
stops the build and nothing is written to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, List, Optional

from .. import __version__
from ..core.errors import ConfigurationError, ResilienceError
from ..core.fme import fpkg
from ..fme.caller_base import WORKSPACE_ATTRIBUTES
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, command, exit_codes

__all__ = ["add_parser", "build_package", "PackageError"]

DEFAULT_OUT = "dist"
#: What in a checkout is no source of the wheel (earlier builds, environments, caches).
_NOT_SOURCE = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
               ".pytest_cache", ".hypothesis", "*.fpkg")
#: The oldest interpreter the package's wheels must serve (pip picks releases for it).
PYTHON_VERSION = "3.9"


class PackageError(ResilienceError):
    """The package could not be built (a wheel that is not pure Python, pip failing)."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "package", help="build the FME Package (.fpkg)",
        epilog=exit_codes("a wheel could not be built or fetched, or is not pure Python",
                          usage="a missing checkout or wheelhouse"),
        description="Build the FME Package: native transformers for WS-01, WS-02 and WS-03 "
                    "and the library's wheel with its pure-Python dependencies.")
    actions = p.add_subparsers(dest="package_command", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="write DIR/fair.fme-ai-resilience-VERSION.fpkg",
        epilog=exit_codes("a wheel could not be built or fetched, or is not pure Python",
                          usage="a missing checkout or wheelhouse"),
        description="Write the FME Package into --out. The library's wheel is built from "
                    "the checkout; its dependencies come from --wheelhouse or are downloaded "
                    "by pip as pure-Python wheels.")
    build.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                       help=f"where the .fpkg goes (default: {DEFAULT_OUT})")
    build.add_argument("--source", metavar="DIR",
                       help="the checkout to build the library's wheel from (default: the "
                            "checkout this library runs from)")
    build.add_argument("--wheelhouse", metavar="DIR",
                       help="a directory of the dependency wheels to use instead of "
                            "downloading them (default: download with pip)")
    build.set_defaults(func=run_build)


def _checkout(given: Optional[str]) -> Path:
    root = Path(given) if given else Path(__file__).resolve().parent.parent.parent
    if not (root / "setup.cfg").is_file() or not (root / "fme_ai_resilience").is_dir():
        raise ConfigurationError("--source", str(root), "is no checkout of fme-ai-resilience "
                                 "(no setup.cfg beside fme_ai_resilience/)")
    return root


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise PackageError(f"pip {args[0]}: {last}")


def _dependencies(target: Path, wheelhouse: Optional[str]) -> None:
    if wheelhouse is None:
        _pip("download", "--only-binary", ":all:", "--platform", "any", "--implementation",
             "py", "--abi", "none", "--python-version", PYTHON_VERSION, "-d", str(target),
             *fpkg.PURE_REQUIREMENTS)
        return
    source = Path(wheelhouse)
    if not source.is_dir():
        raise ConfigurationError("--wheelhouse", wheelhouse, "is not a directory")
    for wheel in sorted(source.glob("*.whl")):
        if fpkg.wheel_distribution(wheel.name) != "fme_ai_resilience":  # the built one wins
            shutil.copy(wheel, target)


def _check_wheels(python: Path) -> List[str]:
    """The distribution names, the library's first; PackageError for any wheel that is not
    pure Python or that FME brings itself."""
    names: List[str] = []
    for wheel in sorted(python.glob("*.whl")):
        name = fpkg.wheel_distribution(wheel.name)
        if name.lower() in fpkg.LEFT_TO_FME:
            wheel.unlink()  # FME's own copy is used
            continue
        if not fpkg.is_pure_wheel(wheel.name):
            raise PackageError(f"{wheel.name} is not a pure-Python wheel")
        with zipfile.ZipFile(wheel) as archive:
            compiled = fpkg.compiled_files(archive.namelist())
        if compiled:
            raise PackageError(f"{wheel.name} holds compiled files: {', '.join(compiled[:3])}")
        names.append(name)
    library = [n for n in names if n == "fme_ai_resilience"]
    if not library:
        raise PackageError("the library's own wheel was not built")
    return library + [n for n in names if n != "fme_ai_resilience"]


def build_package(out: Path, *, source: Optional[str] = None,
                  wheelhouse: Optional[str] = None) -> Path:
    """Build the package into ``out`` and return the ``.fpkg`` path."""
    checkout = _checkout(source)
    with tempfile.TemporaryDirectory() as temp:
        stage = Path(temp) / "package"
        python = stage / "python"
        transformers = stage / "transformers"
        python.mkdir(parents=True)
        transformers.mkdir()
        # From a clean copy: setuptools packs whatever an earlier build left in build/lib.
        source_copy = Path(temp) / "source"
        shutil.copytree(checkout, source_copy, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
        _pip("wheel", "--no-deps", "-q", "-w", str(python), str(source_copy))
        _dependencies(python, wheelhouse)
        names = _check_wheels(python)
        (stage / "package.yml").write_text(fpkg.package_yml(__version__, names),
                                           encoding="utf-8")
        (stage / "README.md").write_text(fpkg.readme(__version__), encoding="utf-8")
        (stage / "CHANGES.md").write_text(fpkg.changes(__version__), encoding="utf-8")
        (stage / "icon.png").write_bytes(fpkg.icon_png())
        for t in fpkg.TRANSFORMERS:
            attributes = WORKSPACE_ATTRIBUTES[t.workspace]
            (transformers / f"{t.name}.fmxj").write_text(
                json.dumps(fpkg.fmxj(t, attributes), indent=2) + "\n", encoding="utf-8")
            (transformers / f"{t.name}.md").write_text(fpkg.transformer_help(t, attributes),
                                                       encoding="utf-8")
        out.mkdir(parents=True, exist_ok=True)
        target = out / fpkg.fpkg_filename(__version__)
        partial = target.with_suffix(".fpkg.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in stage.rglob("*") if p.is_file()):
                archive.write(path, path.relative_to(stage).as_posix())
        partial.replace(target)
    return target


@command
def run_build(args: argparse.Namespace) -> int:
    if args.wheelhouse is not None and not Path(args.wheelhouse).is_dir():
        print(f"error: --wheelhouse {args.wheelhouse} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = build_package(Path(args.out), source=args.source, wheelhouse=args.wheelhouse)
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(target)
    return EXIT_OK
