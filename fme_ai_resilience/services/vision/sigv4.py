"""AWS Signature Version 4 for the Rekognition request, with the standard library only.

``sign(request, credentials, now=epoch_s)`` returns a copy of a :class:`VisionRequest` that
carries ``X-Amz-Date``, ``X-Amz-Security-Token`` (for temporary credentials), ``Host`` and the
``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`` header.
It is a pure function of its inputs: the time comes in as epoch seconds (from the client's
injected clock through :func:`rekognition_signer`), never from the system clock.

The canonical request follows the SigV4 rules for services other than S3: the path is
normalised (``.``, ``..`` and empty segments removed) and each segment URI-encoded (RFC 3986
unreserved characters kept) as it stands in the URL, so a ``%`` already there is encoded
again; the query string is decoded, re-encoded and sorted; header names are lower-cased, values
trimmed with inner runs of whitespace collapsed; every header present when signing is signed.
"""
from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote, unquote, urlsplit

from ...core.clock import Clock
from ...core.errors import ConfigurationError
from ...core.vision.request import VisionRequest

__all__ = ["AwsCredentials", "sign", "rekognition_signer", "RekognitionSigner",
           "canonical_request", "string_to_sign", "signing_key", "amz_date", "ALGORITHM"]

ALGORITHM = "AWS4-HMAC-SHA256"
REKOGNITION_CONTENT_TYPE = "application/x-amz-json-1.1"
# headers replaced on every signing, so a request can be signed again (a retry, a later clock)
_SIGNING_HEADERS = frozenset({"authorization", "x-amz-date", "x-amz-security-token"})
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class AwsCredentials:
    """An AWS key pair (plus a session token for temporary credentials), region and service.

    The repr shows the access key id, region and service only. Raises ValueError naming the
    first empty field.
    """

    access_key_id: str
    secret_access_key: str
    session_token: Optional[str] = None
    region: str = "us-east-1"
    service: str = "rekognition"

    def __post_init__(self) -> None:
        for name in ("access_key_id", "secret_access_key", "region", "service"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(name, "[REDACTED]" if "secret" in name else value,
                                         "must be a non-empty string")
        if self.session_token is not None and not isinstance(self.session_token, str):
            raise ConfigurationError("session_token", type(self.session_token).__name__,
                                     "must be a string or None")

    def __repr__(self) -> str:
        token = ", session_token=[set]" if self.session_token else ""
        return (f"AwsCredentials(access_key_id={self.access_key_id!r}, "
                f"secret_access_key=[set]{token}, region={self.region!r}, "
                f"service={self.service!r})")

    @property
    def secrets(self) -> Tuple[str, ...]:
        """The values value-based redaction must scrub (secret key, session token)."""
        return tuple(s for s in (self.secret_access_key, self.session_token) if s)


def _uri_encode(text: str) -> str:
    return quote(text, safe="-_.~")


def canonical_uri(path: str) -> str:
    """The path normalised (``.``, ``..`` and empty segments removed) with each segment
    URI-encoded; "/" when nothing is left. A trailing slash is kept."""
    segments: List[str] = []
    parts = (path or "/").split("/")
    for seg in parts:
        if seg == "..":
            if segments:
                segments.pop()
        elif seg not in ("", "."):
            segments.append(seg)
    out = "/" + "/".join(_uri_encode(s) for s in segments)
    if segments and parts[-1] in ("", ".", ".."):
        out += "/"
    return out


def canonical_query(query: str) -> str:
    """The query parameters decoded, re-encoded per RFC 3986 and sorted by name then value."""
    pairs = []
    for item in query.split("&") if query else ():
        if not item:
            continue
        name, _, value = item.partition("=")
        pairs.append((_uri_encode(unquote(name)), _uri_encode(unquote(value))))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def canonical_headers(headers: Mapping[str, str]) -> Tuple[str, str]:
    """``(canonical header block, signed header list)`` for ``headers``.

    Names are lower-cased; values trimmed with runs of whitespace collapsed to one space;
    names differing only in case are joined with commas.
    """
    merged: Dict[str, List[str]] = {}
    for name, value in headers.items():
        merged.setdefault(name.strip().lower(), []).append(
            _SPACES.sub(" ", str(value).strip()))
    names = sorted(merged)
    block = "".join(f"{n}:{','.join(merged[n])}\n" for n in names)
    return block, ";".join(names)


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parts.scheme.lower())
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def canonical_request(request: VisionRequest) -> Tuple[str, str]:
    """``(canonical request text, signed header list)`` for an already dated request."""
    parts = urlsplit(request.url)
    block, signed = canonical_headers(request.headers)
    payload_hash = hashlib.sha256(bytes(request.body)).hexdigest()
    text = "\n".join((request.method.upper(), canonical_uri(parts.path),
                      canonical_query(parts.query), block, signed, payload_hash))
    return text, signed


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret_access_key: str, date: str, region: str, service: str) -> bytes:
    """The derived key: HMAC chain over the date (YYYYMMDD), region, service, aws4_request."""
    key = _hmac(("AWS4" + secret_access_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def amz_date(now_epoch_s: float) -> str:
    """``now_epoch_s`` (epoch seconds) as the SigV4 basic-format UTC timestamp."""
    moment = datetime.fromtimestamp(int(now_epoch_s), tz=timezone.utc)
    return moment.strftime("%Y%m%dT%H%M%SZ")


def string_to_sign(timestamp: str, scope: str, canonical: str) -> str:
    """The algorithm, timestamp, credential scope and the canonical request's SHA-256."""
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{timestamp}\n{scope}\n{digest}"


def sign(request: VisionRequest, credentials: AwsCredentials, *, now: float,
         content_sha256: bool = False) -> VisionRequest:
    """A copy of ``request`` signed with SigV4 at ``now`` (epoch seconds, UTC).

    Adds ``Host`` (from the URL) when absent, ``X-Amz-Date``, ``X-Amz-Security-Token`` when the
    credentials carry a session token, ``x-amz-content-sha256`` when ``content_sha256``, and
    ``Authorization``; every header present is signed. Earlier signing headers are replaced.
    """
    timestamp = amz_date(now)
    headers = {k: v for k, v in request.headers.items()
               if k.strip().lower() not in _SIGNING_HEADERS}
    if not any(k.strip().lower() == "host" for k in headers):
        headers["Host"] = _host(request.url)
    headers["X-Amz-Date"] = timestamp
    if credentials.session_token:
        headers["X-Amz-Security-Token"] = credentials.session_token
    if content_sha256:
        headers["x-amz-content-sha256"] = hashlib.sha256(bytes(request.body)).hexdigest()
    dated = replace(request, headers=headers)
    canonical, signed = canonical_request(dated)
    scope = f"{timestamp[:8]}/{credentials.region}/{credentials.service}/aws4_request"
    key = signing_key(credentials.secret_access_key, timestamp[:8], credentials.region,
                      credentials.service)
    signature = hmac.new(key, string_to_sign(timestamp, scope, canonical).encode("utf-8"),
                         hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
    return replace(request, headers=headers)


class RekognitionSigner:
    """The ``signer`` callable for :class:`Credentials`: signs each request at ``clock.now()``.

    Its repr and :attr:`secrets` follow :class:`AwsCredentials`.
    """

    def __init__(self, credentials: AwsCredentials, *, clock: Clock) -> None:
        self.credentials = credentials
        self.clock = clock

    def __call__(self, request: VisionRequest) -> VisionRequest:
        return sign(request, self.credentials, now=self.clock.now())

    def __repr__(self) -> str:
        return f"RekognitionSigner({self.credentials!r})"

    @property
    def secrets(self) -> Tuple[str, ...]:
        return self.credentials.secrets


def rekognition_signer(credentials: AwsCredentials, *,
                       clock: Clock) -> Callable[[VisionRequest], VisionRequest]:
    """A signer that dates each Rekognition request from ``clock`` (the client's clock)."""
    return RekognitionSigner(credentials, clock=clock)
