"""``fme-ai-resilience package stage|build``: the FME Package, packed by Safe's packager.

``stage`` writes the package directory Safe's ``fme-packager`` works on: ``package.yml``,
README, CHANGES, the icon, the three transformers (``transformers/<Name>.fmxj`` and the Quick
Add text ``<Name>.md``), their help pages in ``help/`` beside the sample workspace, and
``python/``: the library's wheel, built with pip from a copy of the checkout without its
build folders and with Safe's fmetools vendored into it (``fme_ai_resilience._vendor``), and
its dependencies as pure-Python wheels. ``build`` stages into a temporary directory and runs
``fme-packager pack`` on it (Safe's checks of the forms and the manifest, and the help turned
into HTML), writing ``fair.fme-ai-resilience-VERSION.fpkg`` into ``--out``.

Third-party wheels come from ``--wheelhouse`` or are downloaded by pip (``--only-binary
:all:`` for the ``any`` platform, so nothing compiled can come), at the versions the
checkout's ``fpkg-constraints.txt`` pins. Every wheel is checked: its tags say ``none-any``,
it holds no compiled file, and its version is the pinned one; one that fails stops the build
and nothing is written to ``--out``. The library's wheel asks for nothing the package does
not bring or FME does not ship (``waitress``, the gateway's server, is dropped from its
requirements).
"""
from __future__ import annotations

import argparse
import errno
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from .. import __version__
from ..core.errors import ConfigurationError, ResilienceError
from ..core.fme import fpkg, fpkg_help
from ..fme.caller_base import WORKSPACE_ATTRIBUTES
from ..core.fme.fmw_sample import render_sample
from ..core.fme.fmxj import fmxj
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, command, exit_codes
from .files import copy_file

__all__ = ["add_parser", "build_package", "stage_package", "PackageError"]

DEFAULT_OUT = "dist"
#: What in a checkout is no source of the wheel (earlier builds, environments, caches).
_NOT_SOURCE = (".git", ".venv", ".venv-*", "venv", "build", "dist", "*.egg-info",
               "__pycache__", ".pytest_cache", ".hypothesis", "*.fpkg")
#: The oldest interpreter the package's wheels must serve (pip picks releases for it).
PYTHON_VERSION = "3.9"
_LIBRARY = "fme_ai_resilience"


class PackageError(ResilienceError):
    """The package could not be built (a wheel that is not pure Python or not pinned, pip or
    Safe's packager failing)."""


def add_parser(subparsers: Any) -> None:
    codes = exit_codes("a wheel could not be built or fetched, is not pure Python or not "
                       "pinned, or Safe's packager refused the package",
                       usage="a missing checkout, wheelhouse or fme-packager")
    p = subparsers.add_parser(
        "package", help="build the FME Package (.fpkg)", epilog=codes,
        description="Build the FME Package: native transformers for WS-01, WS-02 and WS-03, "
                    "their help, a sample workspace, and the library's wheel with its "
                    "pinned pure-Python dependencies.")
    actions = p.add_subparsers(dest="package_command", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="write DIR/fair.fme-ai-resilience-VERSION.fpkg", epilog=codes,
        description="Stage the package and pack it with Safe's fme-packager (the 'package' "
                    "extra, Python 3.10+) into --out.")
    stage = actions.add_parser(
        "stage", help="write the package directory fme-packager packs", epilog=codes,
        description="Write the package directory (package.yml, transformers/, help/, "
                    "python/ ...) into --out, for 'fme-packager pack DIR'.")
    for action, default, func in ((build, DEFAULT_OUT, run_build),
                                  (stage, "fpkg-stage", run_stage)):
        action.add_argument("--out", default=default, metavar="DIR",
                            help=f"where the result goes (default: {default})")
        action.add_argument("--source", metavar="DIR",
                            help="the checkout to build the library's wheel from (default: "
                                 "the checkout this library runs from)")
        action.add_argument("--wheelhouse", metavar="DIR",
                            help="a directory of the dependency wheels to use instead of "
                                 "downloading them (default: download with pip)")
        action.set_defaults(func=func)


def _checkout(given: Optional[str]) -> Path:
    root = Path(given) if given else Path(__file__).resolve().parent.parent.parent
    if not (root / "setup.cfg").is_file() or not (root / _LIBRARY).is_dir():
        raise ConfigurationError("--source", str(root), "is no checkout of fme-ai-resilience "
                                 "(no setup.cfg beside fme_ai_resilience/)")
    if not (root / fpkg.CONSTRAINTS_FILE).is_file():
        raise ConfigurationError("--source", str(root), f"has no {fpkg.CONSTRAINTS_FILE}")
    return root


def _run(args: List[str], what: str, cwd: Optional[Path] = None) -> None:
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or f"{what} failed").splitlines()
        raise PackageError(f"{what}: {lines[-1]}")


def _pip(*args: str) -> None:
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], f"pip {args[0]}")


def _dependencies(target: Path, wheelhouse: Optional[str], constraints: Path) -> None:
    if wheelhouse is None:
        _pip("download", "--only-binary", ":all:", "--platform", "any", "--implementation",
             "py", "--abi", "none", "--python-version", PYTHON_VERSION, "-d", str(target),
             "-c", str(constraints), *fpkg.PURE_REQUIREMENTS, *fpkg.VENDORED)
        return
    source = Path(wheelhouse)
    if not source.is_dir():
        raise ConfigurationError("--wheelhouse", wheelhouse, "is not a directory")
    for wheel in sorted(source.glob("*.whl")):
        if fpkg.wheel_distribution(wheel.name) != _LIBRARY:  # the built one wins
            shutil.copy(wheel, target)


def _vendor(deps: Path, source: Path, pins: Dict[str, str]) -> None:
    """Unpack each vendored wheel's package into ``fme_ai_resilience/_vendor/`` of the source
    copy (absolute imports of itself made relative to its new place, its licence kept) and
    list the new packages in the copy's setup.cfg, so pip builds them into the wheel."""
    vendor = source / _LIBRARY / "_vendor"
    vendor.mkdir()
    (vendor / "__init__.py").write_text(
        '"""Third-party code the FME Package brings, at the versions fpkg-constraints.txt '
        'pins (built in by package build, never edited here)."""\n', encoding="utf-8")
    packages = [f"{_LIBRARY}._vendor"]
    for name in fpkg.VENDORED:
        wheels = [w for w in deps.glob("*.whl")
                  if fpkg.canonical_name(fpkg.wheel_distribution(w.name)) == name]
        if len(wheels) != 1:
            raise PackageError(f"{name}: expected one wheel to vendor, found {len(wheels)}")
        wheel = wheels[0]
        _check_pinned(wheel.name, pins)
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(f"{name}/") and not member.endswith("/"):
                    text = archive.read(member)
                    if member.endswith(".py"):
                        text = re.sub(rb"\b(from|import) " + name.encode() + rb"\b",
                                      rb"\1 " + f"{_LIBRARY}._vendor.{name}".encode(), text)
                    path = vendor / member
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(text)
                elif re.search(r"\.dist-info/(licenses/)?LICEN[CS]E", member):
                    (vendor / name).mkdir(exist_ok=True)
                    (vendor / name / "LICENSE").write_bytes(archive.read(member))
        packages += sorted(f"{_LIBRARY}._vendor." + ".".join(p.parent.relative_to(
            vendor).parts) for p in (vendor / name).rglob("__init__.py"))
        wheel.unlink()
    setup = source / "setup.cfg"
    text = setup.read_text(encoding="utf-8")
    text = text.replace(f"    {_LIBRARY}.fme\n", f"    {_LIBRARY}.fme\n" + "".join(
        f"    {p}\n" for p in packages), 1)
    text = text.replace("[options.package_data]\n", "[options.package_data]\n" + "".join(
        f"{_LIBRARY}._vendor.{n} = LICENSE\n" for n in fpkg.VENDORED), 1)
    setup.write_text(text, encoding="utf-8")


def _without_server(source: Path) -> None:
    """The source copy's setup.cfg without ``waitress`` among the requirements: the package
    leaves it out (the gateway's server never runs inside FME), so its library wheel must
    not ask for it, or an installer resolving requirements offline would stop there."""
    setup = source / "setup.cfg"
    text = setup.read_text(encoding="utf-8")
    setup.write_text(re.sub(r"(?m)^[ \t]+waitress\b[^\n]*\n", "", text, count=1),
                     encoding="utf-8")


def _check_pinned(filename: str, pins: Dict[str, str]) -> None:
    name = fpkg.canonical_name(fpkg.wheel_distribution(filename))
    version = fpkg.wheel_version(filename)
    if pins.get(name) != version:
        wanted = f"pins {pins[name]}" if name in pins else "does not pin it"
        raise PackageError(f"{filename}: {fpkg.CONSTRAINTS_FILE} {wanted}")


def _check_wheels(python: Path, pins: Dict[str, str], *, library: bool = True) -> List[str]:
    """The distribution names, the library's first; PackageError for any wheel that is not
    pure Python or not at its pinned version. FME's own (requests ...) are dropped. With
    ``library`` False, the folder holds only the dependencies (checked before anything is
    built from them)."""
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
        if name != _LIBRARY:
            _check_pinned(wheel.name, pins)
        names.append(name)
    if not library:
        return names
    if _LIBRARY not in names:
        raise PackageError("the library's own wheel was not built")
    return [_LIBRARY] + [n for n in names if n != _LIBRARY]


def stage_package(stage: Path, *, source: Optional[str] = None,
                  wheelhouse: Optional[str] = None) -> Path:
    """Write the package directory into ``stage`` (which must not exist) and return it."""
    checkout = _checkout(source)
    constraints = checkout / fpkg.CONSTRAINTS_FILE
    pins = fpkg.pinned_versions(constraints.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as temp:
        deps = Path(temp) / "deps"
        deps.mkdir()
        _dependencies(deps, wheelhouse, constraints)
        _check_wheels(deps, pins, library=False)
        # From a clean copy: setuptools packs whatever an earlier build left in build/lib.
        source_copy = Path(temp) / "source"
        shutil.copytree(checkout, source_copy, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
        _vendor(deps, source_copy, pins)
        _without_server(source_copy)
        python = Path(temp) / "python"
        python.mkdir()
        _pip("wheel", "--no-deps", "-q", "-w", str(python), str(source_copy))
        for wheel in deps.glob("*.whl"):
            shutil.copy(wheel, python)
        names = _check_wheels(python, pins)
        shipped = {fpkg.canonical_name(fpkg.wheel_distribution(w.name)): fpkg.wheel_version(
            w.name) for w in python.glob("*.whl") if not w.name.startswith(_LIBRARY)}
        shipped.update({n: pins[n] for n in fpkg.VENDORED})
        stage.mkdir(parents=True)
        shutil.copytree(python, stage / "python")
    _write_files(stage, names, shipped)
    return stage


def _write_files(stage: Path, names: List[str], shipped: Dict[str, str]) -> None:
    (stage / "package.yml").write_text(fpkg.package_yml(__version__, names), encoding="utf-8")
    (stage / "README.md").write_text(fpkg.readme(__version__, shipped), encoding="utf-8")
    (stage / "CHANGES.md").write_text(fpkg.changes(__version__), encoding="utf-8")
    (stage / "icon.png").write_bytes(fpkg.icon_png())
    transformers, help_dir = stage / "transformers", stage / "help"
    transformers.mkdir()
    help_dir.mkdir()
    for t in fpkg.TRANSFORMERS:
        attributes = WORKSPACE_ATTRIBUTES[t.workspace]
        (transformers / f"{t.name}.fmxj").write_text(
            json.dumps(fmxj(t, attributes), indent=4) + "\n", encoding="utf-8")
        (transformers / f"{t.name}.md").write_text(fpkg_help.quick_add(t), encoding="utf-8")
        (help_dir / f"{t.name}.md").write_text(fpkg_help.transformer_help(t, attributes),
                                               encoding="utf-8")
    with open(help_dir / fpkg_help.SAMPLE_WORKSPACE, "w", encoding="utf-8",
              newline="\n") as handle:
        handle.write(render_sample(WORKSPACE_ATTRIBUTES))


def build_package(out: Path, *, source: Optional[str] = None,
                  wheelhouse: Optional[str] = None) -> Path:
    """Stage the package, pack it with Safe's ``fme-packager pack`` and put the ``.fpkg`` in
    ``out``; returns its path. ConfigurationError when fme-packager is not installed."""
    if importlib.util.find_spec("fme_packager") is None:
        raise ConfigurationError("fme-packager", "", "Safe's packager is not installed: "
                                 "pip install -e '.[package]' (Python 3.10 or newer), or run "
                                 "'package stage' and 'fme-packager pack DIR' elsewhere")
    with tempfile.TemporaryDirectory() as temp:
        stage = stage_package(Path(temp) / "package", source=source, wheelhouse=wheelhouse)
        _run([sys.executable, "-m", "fme_packager", "pack", str(stage)],
             "fme-packager pack", cwd=Path(temp))
        built = sorted((stage / "dist").glob("*.fpkg"))
        if len(built) != 1 or built[0].name != fpkg.fpkg_filename(__version__):
            raise PackageError(f"fme-packager pack wrote {[b.name for b in built]}")
        out.mkdir(parents=True, exist_ok=True)
        return copy_file(built[0], out)   # atomically, following no link planted in out


def _usage(args: argparse.Namespace) -> Optional[str]:
    if args.wheelhouse is not None and not Path(args.wheelhouse).is_dir():
        return f"--wheelhouse {args.wheelhouse} is not a directory"
    out = Path(args.out)
    if args.package_command == "build" and out.exists() and not out.is_dir():
        return f"--out {args.out} is not a directory: build writes the .fpkg into one"
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        return f"--out {args.out} is under {above}, which is not a directory"
    if args.package_command == "build" and (out / fpkg.fpkg_filename(__version__)).is_dir():
        return f"--out {args.out} holds a directory named {fpkg.fpkg_filename(__version__)}"
    return None


#: Why a path cannot be written that is the user's to fix (exit 2); any other OSError (a full
#: disk) is a failure of the build (exit 1).
_PATH_ERRORS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES,
                          errno.EPERM, errno.EEXIST, errno.EROFS, errno.ELOOP,
                          errno.ENAMETOOLONG})


def _path_error(exc: OSError) -> int:
    """Say why a path could not be written, in one line; the exit code it deserves."""
    where = f": {exc.filename}" if exc.filename else ""
    print(f"error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
    return EXIT_USAGE if exc.errno in _PATH_ERRORS else EXIT_FAILED


@command
def run_build(args: argparse.Namespace) -> int:
    wrong = _usage(args)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = build_package(Path(args.out), source=args.source, wheelhouse=args.wheelhouse)
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        return _path_error(exc)
    print(target)
    return EXIT_OK


@command
def run_stage(args: argparse.Namespace) -> int:
    wrong = _usage(args) or (f"--out {args.out} exists: stage writes a new directory"
                             if Path(args.out).exists() else None)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = stage_package(Path(args.out), source=args.source, wheelhouse=args.wheelhouse)
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        return _path_error(exc)
    print(target)
    return EXIT_OK
