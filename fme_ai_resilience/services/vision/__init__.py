"""The Vision AI client, its provider adapters and the guarded photo download.

``VisionClient(endpoint, provider, credentials, timeouts).analyze(image, trace_id)`` returns a
:class:`VisionOutcome`; ``providers.normalize`` maps each provider's answer onto one
:class:`Assessment`; ``download.fetch_photo`` fetches a survey photo under a
:class:`DownloadPolicy` (the SSRF guard).
"""
from __future__ import annotations

from .builders import Credentials, RequestOptions, VisionRequest, build_request
from .client import VisionClient, VisionOutcome, traceparent
from .download import DownloadPolicy, Photo, check_url, fetch_photo
from ...core.vision.providers import (PROVIDERS, Assessment, ConditionRules, GenericMapping,
                                      normalize)
from .sigv4 import AwsCredentials, rekognition_signer

__all__ = [
    "PROVIDERS",
    "Assessment",
    "AwsCredentials",
    "ConditionRules",
    "Credentials",
    "DownloadPolicy",
    "GenericMapping",
    "Photo",
    "RequestOptions",
    "VisionClient",
    "VisionOutcome",
    "VisionRequest",
    "build_request",
    "check_url",
    "fetch_photo",
    "normalize",
    "rekognition_signer",
    "traceparent",
]
