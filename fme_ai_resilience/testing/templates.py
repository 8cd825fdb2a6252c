"""The shipped workspace templates' PythonCaller scripts, as classes :func:`run_caller` runs.

The scripts are the ones the ``.fmw`` templates embed (``workspaces check`` holds each
template to its script), read from the installed package, so a test or the drill runs exactly
what FME would::

    from fme_ai_resilience.testing import run_caller
    from fme_ai_resilience.testing.templates import template_caller

    run = run_caller(template_caller("WS-02_processor"), [{}], {"FAIR_DB": url})
"""
from __future__ import annotations

from importlib import resources
from typing import Any, Dict

from ..core.errors import ConfigurationError
from ..core.fme.fmw import DEFAULT_SYMBOL
from ..core.fme.fmw_v4 import FME_RELEASES, V4_FOLDER
from ..core.fme.parameters import WORKSPACES

__all__ = ["template_script", "template_caller"]

_PACKAGE = "fme_ai_resilience.workspaces"


def template_script(workspace: str, fme: str = "2025") -> str:
    """The PythonCaller script of template ``workspace`` (one of ``WORKSPACES``) for FME
    release ``fme``: 2025's (PythonCaller version 6), or 2023's and 2024's (version 4)."""
    if workspace not in WORKSPACES:
        raise ConfigurationError("workspace", workspace, f"must be one of {list(WORKSPACES)}")
    if fme not in FME_RELEASES:
        raise ConfigurationError("fme", fme, f"must be one of {sorted(FME_RELEASES)}")
    folder = resources.files(_PACKAGE)
    if FME_RELEASES[fme] == "v4":
        folder = folder.joinpath(V4_FOLDER)
    return folder.joinpath(f"{workspace}.py").read_text(encoding="utf-8")


def template_caller(workspace: str, fme: str = "2025") -> Any:
    """The class template ``workspace``'s PythonCaller calls (its "Class to Process
    Features", :data:`~fme_ai_resilience.core.fme.fmw.DEFAULT_SYMBOL`) for FME release ``fme``,
    from its script run in a namespace of its own as FME runs it."""
    namespace: Dict[str, Any] = {"__name__": workspace.replace("-", "_")}
    exec(compile(template_script(workspace, fme), f"{workspace}.py", "exec"), namespace)
    return namespace[DEFAULT_SYMBOL]
