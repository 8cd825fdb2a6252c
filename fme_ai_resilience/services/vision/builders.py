"""The HTTP request each provider expects, and the credentials that go into it.

Secrets travel only in headers (never in a URL): Azure's ``Ocp-Apim-Subscription-Key``,
Google's ``X-goog-api-key``, ``Authorization: Bearer`` for OpenAI-compatible and generic
services. Rekognition needs AWS Signature V4: ``Credentials.aws(AwsCredentials(...), clock=c)``
signs each request with :mod:`.sigv4`; any other ``signer`` (a callable that adds the
signature headers to a :class:`VisionRequest`) may be passed in :class:`Credentials`.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Tuple, Union

from ...core.clock import Clock
from ...core.errors import ConfigurationError
from ...core.vision.validate import ValidationSettings
from ...core.vision.providers import PROVIDERS, openai_result_schema
from ...core.vision.request import VisionRequest
from .sigv4 import AwsCredentials, rekognition_signer

__all__ = ["Image", "Credentials", "RequestOptions", "VisionRequest", "build_request",
           "AZURE_PATH", "AZURE_QUERY", "AZURE_FEATURES", "AZURE_KNOWN_FEATURES",
           "DEFAULT_PROMPT"]

Image = Union[bytes, bytearray, str]

AZURE_PATH = "/computervision/imageanalysis:analyze"
#: The Image Analysis 4.0 features the adapter reads: tags and the tags of detected objects.
#: ``caption`` and ``denseCaptions`` are offered in some regions only (a 400 elsewhere).
AZURE_FEATURES = ("tags", "objects")
#: Every feature Image Analysis 4.0 (api-version 2023-10-01) knows.
AZURE_KNOWN_FEATURES = ("tags", "objects", "caption", "denseCaptions", "read", "smartCrops",
                        "people")
_AZURE_API = "api-version=2023-10-01"
#: The query of the default request (``RequestOptions.azure_features`` changes the features).
AZURE_QUERY = f"{_AZURE_API}&features={','.join(AZURE_FEATURES)}"
DEFAULT_PROMPT = ("Assess the physical condition of the utility asset in this photo. Answer "
                  "with JSON: condition (good, fair or damaged), confidence from 0 to 1, and "
                  "the visual labels you relied on.")


@dataclass(frozen=True)
class Credentials:
    """What authenticates the client: an API key, a bearer token, and/or a request signer.

    The repr never shows the values; :attr:`secrets` lists them for value-based redaction.
    """

    api_key: Optional[str] = None
    token: Optional[str] = None
    signer: Optional[Callable[["VisionRequest"], "VisionRequest"]] = None

    def __repr__(self) -> str:
        shown = [n for n in ("api_key", "token", "signer") if getattr(self, n)]
        return f"Credentials(set={shown})"

    @property
    def secrets(self) -> Tuple[str, ...]:
        signer_secrets = tuple(getattr(self.signer, "secrets", ()) or ())
        return tuple(s for s in (self.api_key, self.token) if s) + signer_secrets

    @classmethod
    def aws(cls, credentials: AwsCredentials, *, clock: Clock) -> "Credentials":
        """Credentials that sign each request with AWS SigV4 at ``clock.now()``.

        Pass the client's own clock so the signature time is the client's time.
        """
        return cls(signer=rekognition_signer(credentials, clock=clock))


@dataclass(frozen=True)
class RequestOptions:
    """Provider request details: the model name (OpenAI), the prompt, generic field names.

    ``conditions`` are the answers the OpenAI-compatible model may give (the result schema's
    ``enum``; empty: any string); pass ``ValidationSettings.conditions`` when configured.
    ``azure_features`` are the Image Analysis features requested from Azure: by default only
    those the adapter reads (it needs ``tags``); every other one costs time and is offered in
    some regions only. Raises ConfigurationError for an unknown feature or one without tags.
    """

    model: str = "gpt-4o-mini"
    prompt: str = DEFAULT_PROMPT
    max_labels: int = 20
    rekognition_target: str = "RekognitionService.DetectLabels"
    generic_url_field: str = "image_url"
    generic_auth_header: str = "Authorization"
    extra: Mapping[str, Any] = field(default_factory=dict)
    conditions: Tuple[str, ...] = ValidationSettings().conditions
    azure_features: Tuple[str, ...] = AZURE_FEATURES

    def __post_init__(self) -> None:
        features = self.azure_features
        if isinstance(features, str) or not all(isinstance(f, str) for f in features):
            raise ConfigurationError("vision.azure_features", features, "must be a list of names")
        unknown = [f for f in features if f not in AZURE_KNOWN_FEATURES]
        if unknown:
            raise ConfigurationError("vision.azure_features", features,
                                     f"{unknown[0]!r} is not one of {list(AZURE_KNOWN_FEATURES)}")
        if "tags" not in features:
            raise ConfigurationError("vision.azure_features", features,
                                     "must include 'tags', which the adapter reads")
        object.__setattr__(self, "azure_features", tuple(dict.fromkeys(features)))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _is_url(image: Image) -> bool:
    return isinstance(image, str)


def _b64(image: Image) -> str:
    return base64.b64encode(bytes(image)).decode("ascii")


def build_request(provider: str, endpoint: str, image: Image, credentials: Credentials,
                  options: Optional[RequestOptions] = None) -> VisionRequest:
    """The request that asks ``provider`` at ``endpoint`` to assess ``image`` (bytes or URL).

    Raises ConfigurationError for an unknown provider or an image form it cannot take
    (Rekognition takes bytes only).
    """
    options = options or RequestOptions()
    base = endpoint.rstrip("/")
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    if provider == "azure-v4":
        query = f"{_AZURE_API}&features={','.join(options.azure_features)}"
        url = f"{base}{AZURE_PATH}?{query}" if "?" not in base else base
        if credentials.api_key:
            headers["Ocp-Apim-Subscription-Key"] = credentials.api_key
        if _is_url(image):
            headers["Content-Type"] = "application/json"
            return VisionRequest("POST", url, headers, _json({"url": image}))
        headers["Content-Type"] = "application/octet-stream"
        return VisionRequest("POST", url, headers, bytes(image))
    if provider == "google":
        url = base if base.endswith(":annotate") else f"{base}/v1/images:annotate"
        if credentials.api_key:
            headers["X-goog-api-key"] = credentials.api_key
        if credentials.token:
            headers["Authorization"] = f"Bearer {credentials.token}"
        img = {"source": {"imageUri": image}} if _is_url(image) else {"content": _b64(image)}
        body = {"requests": [{"image": img, "features": [
            {"type": "LABEL_DETECTION", "maxResults": options.max_labels}]}]}
        headers["Content-Type"] = "application/json"
        return VisionRequest("POST", url, headers, _json(body))
    if provider == "rekognition":
        if _is_url(image):
            raise ConfigurationError("vision.image", "<url>", "rekognition takes image bytes")
        headers.update({"Content-Type": "application/x-amz-json-1.1",
                        "X-Amz-Target": options.rekognition_target})
        body = {"Image": {"Bytes": _b64(image)}, "MaxLabels": options.max_labels}
        body.update(options.extra)
        req = VisionRequest("POST", base + "/", headers, _json(body))
        return credentials.signer(req) if credentials.signer else req
    if provider == "openai":
        url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        if credentials.api_key or credentials.token:
            headers["Authorization"] = f"Bearer {credentials.api_key or credentials.token}"
        image_url = image if _is_url(image) else f"data:image/jpeg;base64,{_b64(image)}"
        body = {"model": options.model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": options.prompt},
            {"type": "image_url", "image_url": {"url": image_url}}]}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "asset_assessment", "strict": True,
                "schema": openai_result_schema(options.conditions)}}}
        headers["Content-Type"] = "application/json"
        return VisionRequest("POST", url, headers, _json(body))
    if provider == "generic":
        secret = credentials.token or credentials.api_key
        if secret:
            name = options.generic_auth_header
            headers[name] = f"Bearer {secret}" if name.lower() == "authorization" else secret
        if _is_url(image):
            headers["Content-Type"] = "application/json"
            body = dict(options.extra)
            body[options.generic_url_field] = image
            return VisionRequest("POST", base, headers, _json(body))
        headers["Content-Type"] = "application/octet-stream"
        return VisionRequest("POST", base, headers, bytes(image))
    raise ConfigurationError("vision.provider", provider, f"must be one of {list(PROVIDERS)}")
