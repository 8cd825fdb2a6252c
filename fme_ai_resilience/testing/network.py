"""A stand-in for Safe's ``fmetools.http``: ``FMERequestsSession`` with FME's network settings.

Inside FME the library makes its HTTP sessions with ``fmetools.http.FMERequestsSession``
(FME's proxies, PAC files, proxy map and certificate store); :func:`installed_fmetools` puts a
stand-in of that module in ``sys.modules`` for a block, so a test sees which session the
library uses. :class:`FakeFMERequestsSession` behaves as Safe's does where it matters here: a
``requests.Session`` whose adapters are a subclass of ``HTTPAdapter`` (as the certificate-store
adapter on Windows is), a User-Agent starting ``FME/``, the proxies FME is configured with,
and a count of the sessions made (``FakeFMERequestsSession.made``).
"""
from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Iterator, List, Mapping, Optional

import requests
from requests.adapters import HTTPAdapter

from ..services.http.sessions import reset_session_choice

__all__ = ["FakeCertStoreAdapter", "FakeFMERequestsSession", "installed_fmetools"]


class FakeCertStoreAdapter(HTTPAdapter):
    """The adapter fmetools mounts on Windows (the system certificate store), as a marker."""


class FakeFMERequestsSession(requests.Session):
    """``fmetools.http.FMERequestsSession`` as a test sees it; ``made`` lists every instance."""

    made: List["FakeFMERequestsSession"] = []
    proxies_configured: Mapping[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        for scheme in ("http://", "https://"):
            self.mount(scheme, FakeCertStoreAdapter())
        self.headers["User-Agent"] = f"FME/2025.1 {self.headers.get('User-Agent')}"
        self.proxies.update(self.proxies_configured)
        self.request_count = 0
        type(self).made.append(self)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:   # type: ignore[override]
        self.request_count += 1
        kwargs.setdefault("timeout", 60)
        return super().request(method, url, **kwargs)


@contextlib.contextmanager
def installed_fmetools(*, proxies: Optional[Mapping[str, str]] = None
                       ) -> Iterator[type]:
    """``fmetools`` and ``fmetools.http`` in ``sys.modules`` for the block, FME's proxies set
    to ``proxies`` (``{"http": url, "https": url}``); yields the session class. What was there
    before comes back, and the library chooses its session class again on both edges."""
    saved = {name: sys.modules.get(name) for name in ("fmetools", "fmetools.http")}
    package = types.ModuleType("fmetools", "A stand-in for Safe's fmetools.")
    http = types.ModuleType("fmetools.http", "A stand-in for fmetools.http.")
    session_class = type("FMERequestsSession", (FakeFMERequestsSession,),
                         {"made": [], "proxies_configured": dict(proxies or {})})
    http.FMERequestsSession = session_class   # type: ignore[attr-defined]
    package.http = http   # type: ignore[attr-defined]
    package.__path__ = []   # type: ignore[attr-defined]
    sys.modules["fmetools"], sys.modules["fmetools.http"] = package, http
    reset_session_choice()
    try:
        yield session_class
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        reset_session_choice()
