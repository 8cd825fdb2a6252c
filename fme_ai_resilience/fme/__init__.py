"""The FME side of the library: the PythonCaller classes, the workspace files, the published
parameters and the deployment on FME Flow.

A workspace's script imports its caller from here, the short path FME authors type::

    from fme_ai_resilience.fme import ProcessorCaller

The callers live in :mod:`.callers` (with :mod:`.caller_base`), the workspace files in
:mod:`.fmw`, :mod:`.fmw_check` and :mod:`.fmw_encoding`, the published parameters in
:mod:`.parameters` and the FME Flow schedules and job bodies in :mod:`.deployment`. The callers'
names are loaded on first use, so importing a module of this package (the workspace renderer,
the parameters) loads neither the callers nor the services behind them.
"""
from __future__ import annotations

import importlib
from typing import Any, List

_CALLERS = "fme_ai_resilience.fme.callers"

#: The names re-exported from :mod:`.callers`.
_EXPORTS = ("IntakeCaller", "ProcessorCaller", "CompensatorCaller", "ATTRIBUTES",
            "CONCLUSION_ATTRIBUTES", "REJECTED_TAG", "CONFIGURATION_CODE", "BODY_PARAMETER",
            "HEADERS_PARAMETER", "injected")

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Load a caller's name from :mod:`.callers` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_CALLERS), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    """The re-exported names beside the module's own."""
    return sorted(set(globals()) | set(_EXPORTS))
