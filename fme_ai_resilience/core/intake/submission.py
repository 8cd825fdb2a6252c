"""``Submission``: one photo of one submitted feature, the unit the ledger registers.

Built by ``fme_ai_resilience.core.intake.survey123.parse_webhook`` (one per photo across image
questions and repeat records), by the reconciler from the feature layer, or, for an ArcGIS
layer webhook, one per notification (``fme_ai_resilience.core.intake.arcgis_webhook``). The
submitter's portal token rides along for the download but never appears in ``repr``,
:meth:`to_payload` or logs.
"""
from __future__ import annotations

from collections import abc
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional

from ..errors import InvalidPayload

__all__ = ["Submission"]


@dataclass(frozen=True)
class Submission:
    """One business fact: a photo (or the lack of a known photo list) of one feature.

    ``idempotency_key`` is derived from normalised GlobalIDs only
    (``fme_ai_resilience.core.intake.keys``).
    ``attachments_unknown`` is True when the webhook carried no attachment list, so the
    processor must list the photos itself through the layer's ``queryAttachments``.
    ``changes_url`` is set on the task of an ArcGIS layer webhook's notification
    (``fme_ai_resilience.core.intake.arcgis_webhook``): the processor reads the changes there
    and registers one task per photo they bring.
    """

    idempotency_key: str
    feature_global_id: str
    trace_id: str
    object_id: Optional[int] = None
    attachment_global_id: Optional[str] = None
    attachment_id: Optional[int] = None
    attachment_url: Optional[str] = None
    content_type: Optional[str] = None
    question: Optional[str] = None
    event_type: str = "addData"
    delivery_id: Optional[str] = None
    layer_url: Optional[str] = None
    service_url: Optional[str] = None
    asset_type: Optional[str] = None
    attributes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    attachments_unknown: bool = False
    source: str = "survey123"
    changes_url: Optional[str] = None
    portal_token: Optional[str] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            raise InvalidPayload("empty idempotency key", field="idempotency_key")
        if not self.feature_global_id:
            raise InvalidPayload("no feature GlobalID", field="feature_global_id")
        if self.attributes is None:  # a stored payload may carry "attributes": null
            object.__setattr__(self, "attributes", {})
        if not isinstance(self.attributes, abc.Mapping):
            raise InvalidPayload("attributes must be an object", field="attributes")
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    def __hash__(self) -> int:
        """Hash on the idempotency key (equality stays field-wise; the attributes' mapping
        proxy is not hashable, so the generated field-wise hash would raise)."""
        return hash(self.idempotency_key)

    def to_payload(self) -> Dict[str, Any]:
        """A JSON-ready dict of everything but the token (what the ledger stores)."""
        out = {name: getattr(self, name) for name in _PAYLOAD_FIELDS}
        out["attributes"] = dict(self.attributes)  # the only mapping field (a read-only proxy)
        return out

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any],
                     portal_token: Optional[str] = None) -> "Submission":
        """The inverse of :meth:`to_payload`; unknown keys are ignored."""
        if not isinstance(payload, abc.Mapping):
            raise InvalidPayload(f"stored payload is a {type(payload).__name__}, not an object")
        known = set(_PAYLOAD_FIELDS)
        try:
            return cls(**{k: v for k, v in payload.items() if k in known},
                       portal_token=portal_token)
        except TypeError as exc:
            raise InvalidPayload(f"stored payload is incomplete: {exc}") from None


#: The fields a payload carries, in declaration order: all but the portal token.
_PAYLOAD_FIELDS = tuple(f.name for f in fields(Submission) if f.name != "portal_token")
