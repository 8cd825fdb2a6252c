"""Which HTTP session the library's calls go out on, chosen once per process, and why.

Inside FME the session is Safe's ``FMERequestsSession`` (``fmetools.http``): it follows FME's
proxy settings, PAC files, proxy map and certificate store, so a call behind a corporate
proxy goes where FME's own transformers' calls go. FME does not include fmetools; the FME
Package brings a copy inside the library's wheel (:data:`VENDORED`, built in by
``package build``), and a top-level ``fmetools`` (installed by hand) is used otherwise.

Elsewhere, or when FME's session cannot be made inside FME, the session is an
:class:`EnvironmentSession`: proxies from ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` and the CA
bundle from ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE``, as requests reads them, but never
credentials from ``~/.netrc`` (an Authorization the library sets stays its own), and never the
proxy for a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``), which only this
machine serves. What was
chosen, and why FME's session was not, is :func:`session_choice`: the callers log it at their
first feature, with one WARN when FME's session could not be made (docs/fme-flow.md, FME's
network settings); nothing here logs it again.
"""
from __future__ import annotations

import importlib
import ipaddress
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional
from urllib.parse import urlsplit

import requests
from requests.auth import AuthBase

from ...core.text.redact import redact_text

__all__ = ["EnvironmentSession", "SessionChoice", "session_choice", "fme_session_class",
           "reset_session_choice", "note_fme_session_failed", "VENDORED", "inside_fme",
           "without_netrc"]

log = logging.getLogger("fme_ai_resilience.sessions")

#: Where the FME Package puts its copy of fmetools (inside the library's wheel).
VENDORED = "fme_ai_resilience._vendor.fmetools"
_PLACES = (VENDORED, "fmetools")


class _KeepAuthorization(AuthBase):
    """An auth that changes nothing: set on every request, it keeps requests from reading
    ``~/.netrc`` (which would replace an Authorization header the library set)."""

    def __call__(self, request: Any) -> Any:
        return request


_KEEP = _KeepAuthorization()


def without_netrc(*, session: requests.Session) -> requests.Session:
    """``session`` (FME's ``FMERequestsSession``, which reads the environment as requests
    does) never taking credentials from ``~/.netrc``: an auth that changes nothing, when it
    has none of its own. The library follows no redirect itself, so this is the only place
    requests would read the file."""
    if session.auth is None:
        session.auth = _KEEP
    return session


def _is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine's loopback: ``localhost`` or a 127.0.0.0/8 or
    ``::1`` address."""
    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class EnvironmentSession(requests.Session):
    """A ``requests.Session`` that honours the environment's proxy variables and CA bundle
    (``trust_env``) but never takes credentials from ``~/.netrc``, and never sends a call
    for this machine's loopback to the environment's proxy (whose loopback is its own, not
    this machine's: a local model server's key would reach the proxy, the call never its
    server)."""

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any,
                                   cert: Any) -> Dict[str, Any]:
        local = not proxies and not self.proxies and _is_loopback(str(url or ""))
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if local:   # proxies given in code are kept; the environment's are not
            settings["proxies"] = {}
        return settings

    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        if request.auth is None and self.auth is None:
            request.auth = _KEEP
        return super().prepare_request(request)

    def rebuild_auth(self, prepared_request: requests.PreparedRequest,
                     response: requests.Response) -> None:
        # requests' own, minus the netrc lookup: Authorization is dropped on a host change
        url = prepared_request.url or ""
        if "Authorization" in prepared_request.headers and self.should_strip_auth(
                response.request.url, url):
            del prepared_request.headers["Authorization"]


@dataclass(frozen=True)
class SessionChoice:
    """What the library's HTTP calls go out on in this process.

    ``kind`` is ``"fme"`` (``FMERequestsSession``) or ``"environment"``; ``source`` says
    where fmetools came from (``vendored``, ``installed``) or what the environment session
    honours; ``problem`` why FME's session is not used although this is FME (None: no
    problem, or not FME)."""

    kind: str
    source: str
    problem: Optional[str] = None

    def describe(self) -> str:
        """One phrase for a log line."""
        if self.kind == "fme":
            return f"HTTP through FME's FMERequestsSession ({self.source})"
        return f"HTTP through the library's session ({self.source})"


_LOCK = threading.Lock()
_CHOICE: Dict[str, Any] = {}


def inside_fme() -> bool:
    """Whether this Python runs inside FME (``fmeobjects`` importable)."""
    try:
        importlib.import_module("fmeobjects")
    except ImportError:
        return False
    return True


def _version(module: Any) -> str:
    version = getattr(module, "__version__", None)
    if version is None:
        package = importlib.import_module(module.__name__.rsplit(".", 1)[0])
        version = getattr(package, "__version__", "?")
    return str(version)


def _look_up() -> Dict[str, Any]:
    problems = []
    for place in _PLACES:
        try:
            module = importlib.import_module(f"{place}.http")
            maker = module.FMERequestsSession
        except ImportError as exc:
            if getattr(exc, "name", None) in (place, f"{place}.http", place.split(".")[0],
                                              "fme_ai_resilience._vendor"):
                continue   # not there at all: look in the next place
            problems.append(f"{place} cannot be imported ({type(exc).__name__}: {exc})")
            continue
        except Exception as exc:   # noqa: BLE001 - fmetools there but broken
            problems.append(f"{place} cannot be used ({type(exc).__name__}: {exc})")
            continue
        where = "vendored" if place == VENDORED else "installed"
        return {"maker": maker, "source": f"fmetools {_version(module)}, {where}",
                "problem": None}
    if not problems:
        problems.append("fmetools is not installed (the FME Package brings it)")
    return {"maker": None, "source": "proxies and CA bundle from the environment",
            "problem": "; ".join(problems)}


def _chosen() -> Dict[str, Any]:
    with _LOCK:
        if "maker" not in _CHOICE:
            _CHOICE.update(_look_up())
        return _CHOICE


def fme_session_class() -> Optional[Callable[[], requests.Session]]:
    """``FMERequestsSession`` when fmetools can be imported (the package's copy first), else
    None. Looked up once per process (:func:`reset_session_choice` forgets it)."""
    return _chosen()["maker"]


def note_fme_session_failed(exc: BaseException) -> str:
    """Remember that ``FMERequestsSession()`` raised (FME's proxy settings refused, say):
    from now on this process uses the environment session; returns the reason, redacted."""
    reason = f"FMERequestsSession cannot be made ({type(exc).__name__}: " \
             f"{redact_text(str(exc))})"
    with _LOCK:
        _CHOICE.update(maker=None, source="proxies and CA bundle from the environment",
                       problem=reason)
    log.info("%s; HTTP uses the environment's proxy variables and CA bundle", reason)
    return reason


def session_choice() -> SessionChoice:
    """What :func:`~.sessions.new_session` makes in this process, and, inside FME, why it is
    not FME's own session when it is not."""
    chosen = _chosen()
    kind = "fme" if chosen["maker"] is not None else "environment"
    problem = chosen["problem"] if kind == "environment" and inside_fme() else None
    return SessionChoice(kind, chosen["source"], problem)


def reset_session_choice() -> None:
    """Forget the choice; the next session chooses again (tests that put a stand-in for
    fmetools in place or take it away)."""
    with _LOCK:
        _CHOICE.clear()
