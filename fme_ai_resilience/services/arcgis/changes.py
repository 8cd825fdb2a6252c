"""``extractChanges``: the edits a feature service made within a range of server generations.

:func:`extract_changes` calls the ``changesUrl`` an ArcGIS layer webhook named (through a
:class:`~fme_ai_resilience.services.arcgis.layer.FeatureLayer` of that service, so with its
token, its time limits and its call log). With ``async=true`` the service answers a
``statusUrl``: it is polled, at growing intervals from ``poll_s`` (``arcgis.changes_poll_s``),
until the job is ``Completed``, then its ``resultUrl`` is read; a job that ends ``Failed`` or
``Cancelled``, or is not complete within ``wait_s`` (``arcgis.changes_wait_s``), raises
:class:`~fme_ai_resilience.core.errors.ArcGISError` with the class the retry engine retries by
(SERVER_ERROR; TTFB_TIMEOUT for a job that takes too long). Every request is
one :meth:`FeatureLayer.call_url`, under the layer's connect and read limits, and reaches no
server but the layer's own. A job that completes with errors, or a result past the service's
transfer limit, is read as far as it goes, with a warning: reconciliation finds the rest.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ...core.checks import finite
from ...core.clock import Clock
from ...core.config.pipeline_settings import ArcGISSettings
from ...core.errors import ArcGISError, ErrorClass
from ...core.text.redact import redact_url
from .layer import FeatureLayer

__all__ = ["extract_changes", "LONGEST_POLLS"]

log = logging.getLogger("fme_ai_resilience.arcgis")

#: The defaults of ``arcgis.changes_wait_s`` (how long an asynchronous job may take before the
#: task is retried later: about one Vision AI call's wait, so an engine waits no longer on a
#: slow job than on a slow model) and ``arcgis.changes_poll_s`` (the first wait between two
#: status polls).
_DEFAULTS = ArcGISSettings()
#: Each wait between two polls is 1.5 times the last, at most this many times the first.
LONGEST_POLLS = 10.0

_ENDED = {"failed": "Failed", "cancelled": "Cancelled", "canceled": "Cancelled"}


def extract_changes(layer: FeatureLayer, changes_url: str, *, clock: Clock,
                    wait_s: float = _DEFAULTS.changes_wait_s,
                    poll_s: float = _DEFAULTS.changes_poll_s) -> Mapping[str, Any]:
    """The result of the ``extractChanges`` call ``changes_url`` describes: ``{"edits": ...}``.

    Raises ArcGISError: the service's own error, a job that failed or took longer than
    ``wait_s``, an answer that is neither a result nor a job.
    """
    finite("wait_s", wait_s, above=0)
    finite("poll_s", poll_s, above=0)
    parts = urlsplit(changes_url)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    params: Dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    params["f"] = "json"
    answer = layer.call_url(url, params, "extractChanges")
    if isinstance(answer.get("edits"), list):
        return _whole(answer)
    status_url = answer.get("statusUrl")
    if not isinstance(status_url, str) or not status_url:
        raise ArcGISError(ErrorClass.BAD_FORMAT, "extractChanges answered neither edits nor "
                          "a statusUrl", operation="extractChanges")
    return _job_result(layer, status_url, clock=clock, wait_s=wait_s, poll_s=poll_s)


def _job_result(layer: FeatureLayer, status_url: str, *, clock: Clock,
                wait_s: float, poll_s: float) -> Mapping[str, Any]:
    """Poll an asynchronous job until it completes; its result."""
    until = clock.monotonic() + wait_s
    pause = poll_s
    while True:
        status = layer.call_url(status_url, {"f": "json"}, "extractChanges status")
        state = str(status.get("status", "")).strip()
        if state.lower() in ("completed", "completedwitherrors"):
            result_url = status.get("resultUrl")
            if not isinstance(result_url, str) or not result_url:
                raise ArcGISError(ErrorClass.BAD_FORMAT, "the extractChanges job completed "
                                  "without a resultUrl", operation="extractChanges")
            result = layer.call_url(result_url, {}, "extractChanges result")
            if not isinstance(result.get("edits"), list):
                raise ArcGISError(ErrorClass.BAD_FORMAT, "the extractChanges result holds no "
                                  "edits", operation="extractChanges")
            if state.lower() != "completed":
                log.warning("ArcGIS extractChanges: the job completed with errors; reading "
                            "what it returned (reconciliation finds what it left out)")
            return _whole(result)
        if state.lower() in _ENDED:
            raise ArcGISError(ErrorClass.SERVER_ERROR, f"the extractChanges job ended "
                              f"{_ENDED[state.lower()]} ({redact_url(status_url)})",
                              operation="extractChanges")
        left = until - clock.monotonic()
        if left <= 0:
            raise ArcGISError(ErrorClass.TTFB_TIMEOUT, f"the extractChanges job was not "
                              f"complete after {wait_s:g} s (last status {state or 'none'})",
                              operation="extractChanges")
        clock.sleep(min(pause, left))
        pause = min(pause * 1.5, poll_s * LONGEST_POLLS)


def _whole(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The result, with a warning when the service says it left changes out (its transfer
    limit): those features are found by reconciliation, which compares the layer's photos
    with the ledger's keys."""
    if result.get("exceededTransferLimit") is True:
        log.warning("ArcGIS extractChanges: the result exceeded the service's transfer limit; "
                    "the features it left out are found by reconciliation")
    return result
