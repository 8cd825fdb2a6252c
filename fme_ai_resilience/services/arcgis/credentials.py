"""The processor's own ArcGIS credential: a token, fetched and refreshed before it expires.

A :class:`TokenProvider` hands out the token for each request (``token(now=...)``), tells
which values are secrets (``secrets``, for value-based redaction) and drops its token when the
server refused it (``invalidate()``, after an HTTP-200 ``{"error": {"code": 498}}``), so the
next request fetches a fresh one. Four providers:

- :class:`StaticToken` - a token given once (it cannot be refreshed);
- :class:`OAuthAppToken` - OAuth 2.0 client credentials (an app's ``client_id`` and
  ``client_secret``) at ``<portal>/sharing/rest/oauth2/token``;
- :class:`UserToken` - a named user's ``generateToken`` at ``<portal>/sharing/rest/generateToken``,
  bound to a referer, which every request then sends as its ``Referer`` header;
- :class:`FmeWebConnectionToken` - a named FME web connection, inside FME only (see its
  docstring: unverified without FME).

The refreshing providers decide expiry only from the ``now`` they are given (callers pass
their clock's ``now()``), keep one refresh at a time (concurrent callers wait for it and share
its token) and renew ``refresh_margin_s`` before expiry. While the old token is still valid a
failed renewal is logged and the old token used; with no valid token it raises
:class:`~fme_ai_resilience.core.errors.TokenError`: AUTH when the portal refused the credentials,
the transport or server class (CONNECT_TIMEOUT, SERVER_ERROR, RATE_LIMITED ...) when it could
not answer, so a task can be parked rather than buried. No secret ever reaches a ``repr``, a
log line, an exception or a URL: credentials travel in the POST body only.
"""
from __future__ import annotations

import abc
import logging
import math
import threading
from typing import Any, Mapping, Optional, Protocol, Tuple, Union, runtime_checkable

import requests

from ...core.checks import finite
from ...core.checks import name as non_empty
from ...core.resilience.classification import rule_for
from ...core.clock import SystemClock
from ...core.errors import ArcGISError, ConfigurationError, ErrorClass, TokenError
from ...core.config.pipeline_settings import ArcGISSettings
from ...core.text.redact import redact_text
from .rest import Timeout, send, split_timeout
from ..http.sessions import session_for

__all__ = ["TokenProvider", "StaticToken", "OAuthAppToken", "UserToken",
           "FmeWebConnectionToken", "token_provider_from_settings", "portal_rest_url"]

log = logging.getLogger("fme_ai_resilience.credentials")

#: Token answers are a few hundred bytes; anything far larger is not a token answer.
_MAX_ANSWER_BYTES = 64 * 1024
#: Only the body-read deadline of a token request uses it; expiry is decided from ``now``.
_MONOTONIC = SystemClock()


@runtime_checkable
class TokenProvider(Protocol):
    """Where the token of each ArcGIS request comes from.

    A provider may also have a ``referer`` attribute (a string): the ``Referer`` header its
    tokens are bound to, which :class:`~fme_ai_resilience.services.arcgis.layer.FeatureLayer`
    sends.
    """

    def token(self, *, now: float) -> str:
        """A token valid at ``now`` (epoch seconds). Raises TokenError when none can be had."""

    @property
    def secrets(self) -> Tuple[str, ...]:
        """The secret values this provider knows (token, client secret, password)."""

    def invalidate(self) -> None:
        """Forget the current token: the server refused it; the next call fetches another."""


def portal_rest_url(portal_url: str, field: str = "portal_url") -> str:
    """``<portal>/sharing/rest`` for a portal URL given with or without that suffix."""
    if not isinstance(portal_url, str) or not portal_url.startswith(("https://", "http://")):
        raise ConfigurationError(field, portal_url, "must be an http(s) URL")
    if "?" in portal_url or "#" in portal_url:
        raise ConfigurationError(field, portal_url.split("?", 1)[0],
                                 "must have no query string or fragment")
    base = portal_url.rstrip("/")
    for suffix in ("/sharing/rest", "/sharing"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base + "/sharing/rest"


class StaticToken:
    """A token given once, used as it is: ``invalidate()`` cannot renew it."""

    referer: Optional[str] = None

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError("token", "", "must be a non-empty string")
        self._token = token.strip()

    def token(self, *, now: float) -> str:
        return self._token

    @property
    def secrets(self) -> Tuple[str, ...]:
        return (self._token,)

    def invalidate(self) -> None:
        """Nothing to renew: a static token the server refuses stays refused."""

    def __repr__(self) -> str:
        return "StaticToken([REDACTED])"


class _RefreshingToken(abc.ABC):
    """The shared half of the providers that fetch tokens: the cache, the lock, the margin."""

    referer: Optional[str] = None
    _what = "token"

    def __init__(self, *, session: Optional[requests.Session], refresh_margin_s: float,
                 timeout_s: Timeout, expiration_min: int) -> None:
        self.refresh_margin_s = finite("refresh_margin_s", refresh_margin_s, minimum=0)
        self.timeout_s = split_timeout("timeout_s", timeout_s)
        if not (isinstance(expiration_min, int) and not isinstance(expiration_min, bool)
                and expiration_min >= 1):
            raise ConfigurationError("expiration_min", expiration_min,
                                     "must be a whole number of minutes >= 1")
        self.expiration_min = expiration_min
        self._session = session_for(session=session, clock=_MONOTONIC)
        self._lock = threading.Lock()
        self._token: Optional[str] = None
        self._expires_at = -math.inf
        self._renew_at = -math.inf
        self.refreshes = 0

    # what each provider does ---------------------------------------------------------------
    @abc.abstractmethod
    def _request(self) -> Tuple[str, Mapping[str, str]]:
        """The token endpoint and the form to POST there."""

    @abc.abstractmethod
    def _parse(self, answer: Mapping[str, Any], *, now: float) -> Tuple[Any, Optional[float]]:
        """``(token, expires_at)`` from the answer (``expires_at`` None when not given)."""

    @abc.abstractmethod
    def _known_secrets(self) -> Tuple[str, ...]:
        """The credentials themselves (client secret, password)."""

    # the protocol ----------------------------------------------------------------------------
    @property
    def secrets(self) -> Tuple[str, ...]:
        current = self._token
        return self._known_secrets() + ((current,) if current else ())

    def token(self, *, now: float) -> str:
        """The cached token while ``now`` is before its renewal time, else a fresh one.

        Raises :class:`TokenError` when no valid token can be had.
        """
        finite("now", now)
        with self._lock:
            if self._token is not None and now < self._renew_at:
                return self._token
            try:
                token, expires_at = self._fetch(now=now)
            except TokenError as exc:
                if self._token is not None and now < self._expires_at:
                    # the portal is having a moment; the token we hold is still good
                    self._renew_at = now + min(30.0, (self._expires_at - now) / 4)
                    log.warning("renewing the ArcGIS %s failed, the current one is valid "
                                "%.0f s more: %s", self._what, self._expires_at - now, exc)
                    return self._token
                raise
            lifetime = max(0.0, expires_at - now)
            self._token, self._expires_at = token, expires_at
            # a margin as long as the token's life would renew on every call
            self._renew_at = expires_at - min(self.refresh_margin_s, lifetime / 2)
            self.refreshes += 1
            return token

    def invalidate(self) -> None:
        with self._lock:
            self._token, self._expires_at, self._renew_at = None, -math.inf, -math.inf

    @property
    def expires_at(self) -> Optional[float]:
        """When the current token expires (epoch seconds), None without one."""
        return self._expires_at if self._token is not None else None

    def _fetch(self, *, now: float) -> Tuple[str, float]:
        url, form = self._request()
        secrets = self._known_secrets()
        reply = send("POST", url, {**form, "f": "json"}, operation="token request",
                     now=now, secrets=secrets, timeout_s=self.timeout_s,
                     max_bytes=_MAX_ANSWER_BYTES, session=self._session, clock=_MONOTONIC)
        if reply.error is not None:
            raise _token_error(reply.error)
        token, expires_at = self._parse(reply.result(), now=now)
        if not isinstance(token, str) or not token.strip():
            raise TokenError(ErrorClass.BAD_FORMAT, f"the answer of {url} holds no token",
                             operation="token request", status_code=reply.status_code)
        token = token.strip()
        requested = now + self.expiration_min * 60.0
        # the earlier of what was asked and what the portal says (its clock may differ)
        return token, requested if expires_at is None else min(requested, expires_at)


def _token_error(error: ArcGISError) -> TokenError:
    """A refused token request is AUTH (bad credentials); an outage keeps its own class."""
    error_class = error.error_class
    if not rule_for(error_class).retry:
        error_class = ErrorClass.AUTH
    return TokenError(error_class, error.reason, operation=error.operation,
                      status_code=error.status_code, code=error.code,
                      retry_after_s=error.retry_after_s)


def _number(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


class OAuthAppToken(_RefreshingToken):
    """An OAuth 2.0 app token (client-credentials grant) from ``<portal>/sharing/rest/oauth2/token``.

    ``expiration_min`` is the lifetime asked for (the portal may give less: its
    ``expires_in`` wins); ``timeout_s`` one number or ``(connect, read)`` seconds.
    """

    _what = "app token"

    def __init__(self, portal_url: str, client_id: str, client_secret: str, *,
                 session: Optional[requests.Session] = None, refresh_margin_s: float = 120.0,
                 timeout_s: Timeout = 30.0, expiration_min: int = 120) -> None:
        self.url = portal_rest_url(portal_url) + "/oauth2/token"
        self.client_id = non_empty("client_id", client_id)
        if not isinstance(client_secret, str) or not client_secret:
            raise ConfigurationError("client_secret", "", "must be a non-empty string")
        self._client_secret = client_secret
        super().__init__(session=session, refresh_margin_s=refresh_margin_s,
                         timeout_s=timeout_s, expiration_min=expiration_min)

    def _request(self) -> Tuple[str, Mapping[str, str]]:
        return self.url, {"client_id": self.client_id, "client_secret": self._client_secret,
                          "grant_type": "client_credentials",
                          "expiration": str(self.expiration_min)}

    def _parse(self, answer: Mapping[str, Any], *, now: float) -> Tuple[Any, Optional[float]]:
        lifetime = _number(answer.get("expires_in"))
        return answer.get("access_token"), None if lifetime is None else now + lifetime

    def _known_secrets(self) -> Tuple[str, ...]:
        return (self._client_secret,)

    def __repr__(self) -> str:
        return f"OAuthAppToken({self.url!r}, client_id={self.client_id!r})"


class UserToken(_RefreshingToken):
    """A named user's token from ``<portal>/sharing/rest/generateToken`` (``client=referer``).

    The token is bound to ``referer`` (default: the portal URL); requests made with it send
    that value as their ``Referer`` header. ``expires`` (epoch milliseconds) in the answer
    caps ``expiration_min``.
    """

    _what = "user token"

    def __init__(self, portal_url: str, username: str, password: str, *,
                 referer: Optional[str] = None, session: Optional[requests.Session] = None,
                 refresh_margin_s: float = 120.0, timeout_s: Timeout = 30.0,
                 expiration_min: int = 120) -> None:
        rest = portal_rest_url(portal_url)
        self.url = rest + "/generateToken"
        self.username = non_empty("username", username)
        if not isinstance(password, str) or not password:
            raise ConfigurationError("password", "", "must be a non-empty string")
        self._password = password
        self.referer = non_empty("referer", referer if referer is not None
                            else rest[: -len("/sharing/rest")])
        super().__init__(session=session, refresh_margin_s=refresh_margin_s,
                         timeout_s=timeout_s, expiration_min=expiration_min)

    def _request(self) -> Tuple[str, Mapping[str, str]]:
        return self.url, {"username": self.username, "password": self._password,
                          "client": "referer", "referer": str(self.referer),
                          "expiration": str(self.expiration_min)}

    def _parse(self, answer: Mapping[str, Any], *, now: float) -> Tuple[Any, Optional[float]]:
        expires_ms = _number(answer.get("expires"))
        return answer.get("token"), None if expires_ms is None else expires_ms / 1000.0

    def _known_secrets(self) -> Tuple[str, ...]:
        return (self._password,)

    def __repr__(self) -> str:
        return f"UserToken({self.url!r}, username={self.username!r})"


class FmeWebConnectionToken:
    """The token of a named FME web connection, read through FME's ``fmewebservices``.

    Inside FME only: ``fmewebservices`` is imported when the provider is made, and its absence
    is a :class:`ConfigurationError`. FME keeps and renews the connection's token itself, so
    each ``token()`` asks the connection (``getAccessToken()``) and ``invalidate()`` marks it
    suspect (``setSuspectExpired()``). ``manager`` stands in for
    ``fmewebservices.FMENamedConnectionManager()`` in tests.

    **Unverified without FME**: the calls follow the token and OAuth 2.0 connection classes
    of ``fmewebservices`` as Safe's ``fmetools`` uses them; whether an Esri ArcGIS web
    connection is one of those classes, whether its token is accepted in the
    ``X-Esri-Authorization`` header, and how FME renews it, were not checked against a
    running FME.
    """

    referer: Optional[str] = None

    def __init__(self, name: str, *, manager: Any = None) -> None:
        self.name = non_empty("arcgis.web_connection", name)
        if manager is None:
            try:
                import fmewebservices  # FME's own module, present only inside FME
            except ImportError:
                raise ConfigurationError(
                    "arcgis.web_connection", self.name,
                    "a named FME web connection needs FME (its fmewebservices module is "
                    "not importable here); use arcgis.token, client_id/client_secret or "
                    "username/password outside FME") from None
            manager = fmewebservices.FMENamedConnectionManager()
        self._manager = manager
        self._lock = threading.Lock()
        self._last: Optional[str] = None

    def _connection(self) -> Any:
        connection = self._manager.getNamedConnection(self.name)
        if not connection:
            raise ConfigurationError("arcgis.web_connection", self.name,
                                     "FME has no web connection of this name")
        if not callable(getattr(connection, "getAccessToken", None)):
            raise ConfigurationError("arcgis.web_connection", self.name,
                                     "is not a token or OAuth 2.0 web connection")
        return connection

    def token(self, *, now: float) -> str:
        """The connection's current token. Raises ConfigurationError or TokenError (AUTH)."""
        with self._lock:
            connection = self._connection()
            try:
                value = connection.getAccessToken()
            except Exception as exc:  # FME's own exception types are not importable here
                raise TokenError(ErrorClass.AUTH, f"web connection {self.name!r}: "
                                 f"{redact_text(str(exc), [self._last])}",
                                 operation="web connection") from None
            token = value.strip() if isinstance(value, str) else ""
            if not token:
                raise TokenError(ErrorClass.AUTH, f"web connection {self.name!r} gave no "
                                 "token (authorise it in FME)", operation="web connection")
            self._last = token
            return token

    @property
    def secrets(self) -> Tuple[str, ...]:
        return (self._last,) if self._last else ()

    def invalidate(self) -> None:
        with self._lock:
            connection = self._manager.getNamedConnection(self.name)
            mark = getattr(connection, "setSuspectExpired", None)
            if callable(mark):
                mark()

    def __repr__(self) -> str:
        return f"FmeWebConnectionToken({self.name!r})"


def token_provider_from_settings(settings: Union[ArcGISSettings, Any], *,
                                 session: Optional[requests.Session] = None
                                 ) -> Optional[TokenProvider]:
    """The provider the ``arcgis`` settings name, or None when they name none.

    ``settings`` is a :class:`~fme_ai_resilience.core.config.settings.Settings` or its ``arcgis`` group.
    Precedence: ``token``, then ``client_id``/``client_secret``, then ``username``/
    ``password``, then ``web_connection``.
    """
    group = getattr(settings, "arcgis", settings)
    if not isinstance(group, ArcGISSettings):
        raise ConfigurationError("settings", type(settings).__name__,
                                 "must be Settings or ArcGISSettings")
    common = dict(session=session, refresh_margin_s=group.token_refresh_margin_s,
                  timeout_s=group.request_timeout_s)
    if group.token:
        return StaticToken(group.token)
    if group.client_id and not group.portal_url:
        raise ConfigurationError("arcgis.portal_url", "", "client_id needs the portal URL")
    if group.client_id:
        return OAuthAppToken(group.portal_url, group.client_id, group.client_secret, **common)
    if group.username and not group.portal_url:
        raise ConfigurationError("arcgis.portal_url", "", "username needs the portal URL")
    if group.username:
        return UserToken(group.portal_url, group.username, group.password, **common)
    if group.web_connection:
        return FmeWebConnectionToken(group.web_connection)
    return None
