"""Reads the deployment recipes of ``deploy/`` as the tests check them: the systemd units, the
environment files, the compose file and the commands each one runs.

The units run ``/opt/fme-ai-resilience/venv/bin/fme-ai-resilience``; :data:`INSTALLED` names
that path, which a test swaps for the environment's own command.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from helpers import REPO

DEPLOY = REPO / "deploy"
SYSTEMD = DEPLOY / "systemd"
CONFIG = DEPLOY / "config"
CONTAINER = DEPLOY / "container"
#: The command as the units name it, where docs/deployment.md installs it.
INSTALLED = "/opt/fme-ai-resilience/venv/bin/fme-ai-resilience"
#: The command of this environment.
COMMAND = str(Path(sys.executable).parent / "fme-ai-resilience")
#: The services, as ``deploy/systemd/fme-ai-resilience-<name>.service``.
SERVICES = ("serve", "process", "compensate")


def unit_path(name: str) -> Path:
    return SYSTEMD / f"fme-ai-resilience-{name}.service"


def unit(path: Path) -> Dict[str, List[Tuple[str, str]]]:
    """A unit file's ``{section: [(key, value), ...]}``, keys in order and repeated as written
    (``EnvironmentFile=`` twice is two items)."""
    sections: Dict[str, List[Tuple[str, str]]] = {}
    current = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, _, value = line.partition("=")
        assert current is not None, f"{path.name}: {line!r} outside a section"
        current.append((key.strip(), value.strip()))
    return sections


def values(path: Path, section: str, key: str) -> List[str]:
    """Every value ``key`` has in ``section`` of the unit at ``path``."""
    return [v for k, v in unit(path).get(section, []) if k == key]


def one(path: Path, section: str, key: str) -> str:
    found = values(path, section, key)
    assert len(found) == 1, f"{path.name}: [{section}] {key}= given {len(found)} times"
    return found[0]


def commands(path: Path) -> List[List[str]]:
    """The argument lists of a unit's ``ExecStartPre=`` and ``ExecStart=`` lines, after the
    command itself (``["db", "upgrade"]``), in the order they run."""
    out = []
    for key in ("ExecStartPre", "ExecStart"):
        for line in values(path, "Service", key):
            argv = shlex.split(line)
            assert argv[0] == INSTALLED, f"{path.name}: {key} runs {argv[0]}, not {INSTALLED}"
            out.append(argv[1:])
    return out


def env_file(path: Path) -> Dict[str, str]:
    """An environment file as systemd and compose both read it: ``NAME=VALUE`` lines, comments
    on their own lines."""
    found: Dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and name == name.strip() and name.isidentifier(), \
            f"{path.name}:{number}: not NAME=VALUE: {raw!r}"
        assert not value.startswith(("'", '"')) and " #" not in value, \
            f"{path.name}:{number}: quotes or an inline comment read differently by systemd " \
            f"and compose"
        found[name] = value
    return found
