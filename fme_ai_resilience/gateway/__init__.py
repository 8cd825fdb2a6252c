"""The intake gateway: the WSGI application (:mod:`.app`) and the waitress server that serves it
(:mod:`.server`, loaded on first use so the application imports without it).

``from fme_ai_resilience.gateway import make_app`` is the path users type.
"""
from __future__ import annotations

import importlib
from typing import Any, List

from .app import DEFAULT_SECRET_HEADER, make_app, sign

__all__ = ["make_app", "sign", "DEFAULT_SECRET_HEADER", "GatewayServer", "DEFAULT_BACKLOG",
           "serving"]

_SERVER = ("GatewayServer", "DEFAULT_BACKLOG", "serving")


def __getattr__(name: str) -> Any:
    """Load the server's names from :mod:`.server` on first use."""
    if name not in _SERVER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.server"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
