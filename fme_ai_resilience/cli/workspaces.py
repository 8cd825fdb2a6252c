"""``fme-ai-resilience workspaces build|check``: generate the FME workspaces and check them.

``build`` writes ``WS-01_intake.fmw``, ``WS-02_processor.fmw`` and ``WS-03_compensator.fmw``
from the ``.py`` scripts beside them (the source of truth) and the published parameters of
:mod:`fme_ai_resilience.core.fme.parameters`, in two shapes: FME 2025's (PythonCaller version 6,
:mod:`~fme_ai_resilience.core.fme.fmw`) in ``--dir``, and FME 2023's and 2024's (version 4,
:mod:`~fme_ai_resilience.core.fme.fmw_v4`) in ``--dir/fme2023-2024``, from the scripts there;
``--fme 2023|2024|2025`` writes only the shape that release opens. A file whose text would
not change is not touched. ``check`` checks any ``.fmw`` (by default the templates of both
shapes): the rules of :mod:`fme_ai_resilience.core.fme.fmw_check`, and, for a template with its
script beside it, that the file runs exactly that script with exactly its listed parameters
and is what ``build`` writes. Exit codes: 0 every file passes, 1 a problem (one line each on
stdout, ``FILE: rule: what``), 2 a usage error (a missing directory, script or file).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ..fme.caller_base import WORKSPACE_ATTRIBUTES
from ..core.fme.fmw import WorkspaceSpec, render_workspace
from ..core.fme.fmw_check import Problem, check_workspace
from ..core.fme.fmw_v4 import FME_RELEASES, V4_FOLDER, render_workspace_v4
from ..core.fme.parameters import WORKSPACES, parameters_for
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, command, exit_codes
from .files import write_file

__all__ = ["add_parser", "render_template", "check_file"]

DEFAULT_DIR = "workspaces"


def add_parser(subparsers: Any) -> None:
    codes = exit_codes("a file has a problem (one line each on stdout)",
                       usage="a missing directory, script or file")
    p = subparsers.add_parser(
        "workspaces", help="generate and check the FME workspaces", epilog=codes,
        description="Generate the FME workspaces WS-01, WS-02 and WS-03 from their .py scripts "
                    "and check any .fmw file.")
    actions = p.add_subparsers(dest="workspaces_command", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="write the .fmw files from their .py scripts",
        epilog=exit_codes("a script cannot be turned into a workspace",
                          usage="a missing directory or script"),
        description="Write WS-01_intake.fmw, WS-02_processor.fmw and WS-03_compensator.fmw "
                    "from the .py scripts beside them, for FME 2025 (PythonCaller version 6) "
                    f"in DIR and for FME 2023 and 2024 (version 4) in DIR/{V4_FOLDER}; a file "
                    "whose text would not change is not touched.")
    build.add_argument("--dir", default=DEFAULT_DIR,
                       help=f"the directory holding the scripts (default: {DEFAULT_DIR})")
    build.add_argument("--fme", choices=sorted(FME_RELEASES), metavar="RELEASE",
                       help="write only the shape FME RELEASE (2023, 2024 or 2025) opens: "
                            f"version 4 into DIR/{V4_FOLDER} for 2023 and 2024, version 6 "
                            "into DIR for 2025 (default: both)")
    build.set_defaults(func=run_build)
    check = actions.add_parser(
        "check", help="check .fmw files (default: the templates)", epilog=codes,
        description="Check .fmw files against the rules every FME release from 2021.2 saves "
                    "by; a template with its script beside it must also run exactly that "
                    "script and be what 'workspaces build' writes.")
    check.add_argument("files", nargs="*", metavar="FILE", help="workspace files to check")
    check.add_argument("--dir", default=DEFAULT_DIR,
                       help=f"where the templates are when no FILE is given "
                            f"(default: {DEFAULT_DIR})")
    check.set_defaults(func=run_check)


def render_template(name: str, script: str, shape: str = "v6") -> str:
    """The ``.fmw`` text of the template ``name`` (one of :data:`WORKSPACES`) for ``script``,
    in ``shape`` ``v6`` (FME 2025) or ``v4`` (FME 2023 and 2024)."""
    spec = WorkspaceSpec(name, script, parameters_for(name), WORKSPACE_ATTRIBUTES[name])
    return render_workspace_v4(spec) if shape == "v4" else render_workspace(spec)


def _folders(directory: Path, release: Optional[str] = None) -> List[Tuple[Path, str]]:
    """The template folders (and their shape) ``build`` writes for ``release`` (None: all)."""
    shapes = {FME_RELEASES[release]} if release else {"v6", "v4"}
    return [(folder, shape) for folder, shape in ((directory, "v6"),
                                                  (directory / V4_FOLDER, "v4"))
            if shape in shapes]


def _shape_of(path: Path) -> str:
    return "v4" if path.parent.name == V4_FOLDER else "v6"


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


@command
def run_build(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if not directory.is_dir():
        print(f"error: {directory} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    folders = _folders(directory, args.fme)
    missing = [str(folder / f"{name}.py") for folder, _ in folders for name in WORKSPACES
               if not (folder / f"{name}.py").is_file()]
    if missing:
        print(f"error: no script {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    rendered = {folder / f"{name}.fmw": render_template(name, _read(folder / f"{name}.py"),
                                                        shape)
                for folder, shape in folders for name in WORKSPACES}
    for target, text in rendered.items():   # every script was valid before any is written
        if target.is_file() and _read(target) == text:
            print(f"{target}: unchanged")
            continue
        write_file(target, text)
        print(f"{target}: written")
    return EXIT_OK


def check_file(path: Path) -> List[Problem]:
    """The problems of one workspace file, with the template rules when it is a template."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return [Problem("text", f"is not UTF-8: {exc.reason} at byte {exc.start}")]
    script_path = path.with_suffix(".py")
    name = path.stem
    if name not in WORKSPACES or not script_path.is_file():
        return check_workspace(text)
    script = _read(script_path)
    params = parameters_for(name)
    problems = check_workspace(text, expected_script=script,
                               expected_parameters={p.name: p.default for p in params})
    if not problems and text != render_template(name, script, _shape_of(path)):
        problems.append(Problem("stale", f"is not what 'workspaces build' writes from "
                                         f"{script_path.name}: run it again"))
    return problems


def _targets(args: argparse.Namespace) -> Optional[Sequence[Path]]:
    if args.files:
        return [Path(f) for f in args.files]
    directory = Path(args.dir)
    found = [folder / f"{name}.fmw" for folder, _ in _folders(directory)
             for name in WORKSPACES if (folder / f"{name}.fmw").is_file()]
    return found or None


@command
def run_check(args: argparse.Namespace) -> int:
    targets = _targets(args)
    if targets is None:
        print(f"error: no FILE given and no template .fmw in {args.dir}", file=sys.stderr)
        return EXIT_USAGE
    unreadable = [str(p) for p in targets if not p.is_file()]
    if unreadable:
        print(f"error: no such file: {', '.join(unreadable)}", file=sys.stderr)
        return EXIT_USAGE
    failed = 0
    for path in targets:
        problems = check_file(path)
        for problem in problems:
            print(f"{path}: {problem}")
        failed += bool(problems)
    print(f"{len(targets)} file(s) checked, {failed} with problems", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
