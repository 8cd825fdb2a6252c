"""The PythonCaller classes of WS-01/02/03 and the FME Package's transformers.

A workspace's script imports its caller from here, the short path FME authors type::

    from fme_ai_resilience.fme import ProcessorCaller

The callers live in :mod:`.callers` (with :mod:`.caller_base`, and :mod:`.decrypt` for the
parameters FME hands over encrypted), the packaged transformers' classes in
:mod:`.transformers`. The callers' names are loaded on first use, because FME imports this
package on every translation. What FME reads as files (the workspaces, the published
parameters, the package, the deployment on FME Flow) is rendered in
:mod:`fme_ai_resilience.core.fme`.
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
