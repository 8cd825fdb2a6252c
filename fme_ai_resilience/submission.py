"""``Submission``: one photo of one submitted feature, the unit the ledger registers.

Built by ``fme_ai_resilience.survey123.parse_webhook`` (one per photo across image questions
and repeat records) or by the reconciler from the feature layer. The submitter's portal token
rides along for the download but never appears in ``repr``, :meth:`to_payload` or logs.
"""
from __future__ import annotations

import functools
from collections import abc
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import InvalidPayload

_NOT_IN_PAYLOAD = frozenset({"portal_token"})


@functools.lru_cache(maxsize=None)
def _payload_fields(cls: type) -> Tuple[str, ...]:
    """The fields of ``cls`` a payload carries, in declaration order (looked up once per class:
    a payload is built for every registration)."""
    return tuple(f.name for f in fields(cls) if f.name not in _NOT_IN_PAYLOAD)


@dataclass(frozen=True)
class Submission:
    """One business fact: a photo (or the lack of a known photo list) of one feature.

    ``idempotency_key`` is derived from normalised GlobalIDs only (``fme_ai_resilience.keys``).
    ``attachments_unknown`` is True when the webhook carried no attachment list, so the
    processor must list the photos itself through the layer's ``queryAttachments``.
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

    @classmethod
    def _from_checked(cls, values: Dict[str, Any]) -> "Submission":
        """A submission from ``values`` (every field, by name) that the caller built and checked.

        For the webhook parser, which builds one submission per photo: ``attributes`` must be a
        read-only proxy of a dict nobody else holds, so the photos of one record share it
        instead of each copying it. ``values`` becomes the instance's ``__dict__`` (the caller
        hands it over). Anything else falls back to the validating constructor.
        """
        if (values.keys() != _FIELD_NAMES or type(values.get("attributes")) is not MappingProxyType
                or not values.get("idempotency_key") or not values.get("feature_global_id")):
            return cls(**values)
        made = object.__new__(cls)
        object.__setattr__(made, "__dict__", values)
        return made

    def with_delivery_id(self, delivery_id: Optional[str]) -> "Submission":
        """This submission as delivered under ``delivery_id`` (``self`` when it already is).

        A cheap copy, for a redelivery answered from a parse already made: every other field
        was checked when this one was built, so nothing is validated again.
        """
        if delivery_id == self.delivery_id:
            return self
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        object.__setattr__(copy, "delivery_id", delivery_id)
        return copy

    def __hash__(self) -> int:
        """Hash on the idempotency key (equality stays field-wise; the attributes' mapping
        proxy is not hashable, so the generated field-wise hash would raise)."""
        return hash(self.idempotency_key)

    def to_payload(self) -> Dict[str, Any]:
        """A JSON-ready dict of everything but the token (what the ledger stores)."""
        fields_ = self.__dict__
        out = {name: fields_[name] for name in _payload_fields(type(self))}
        out["attributes"] = dict(self.attributes)  # the only mapping field (a read-only proxy)
        return out

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any],
                     portal_token: Optional[str] = None) -> "Submission":
        """The inverse of :meth:`to_payload`; unknown keys are ignored."""
        if not isinstance(payload, abc.Mapping):
            raise InvalidPayload(f"stored payload is a {type(payload).__name__}, not an object")
        known = set(_payload_fields(cls))
        try:
            return cls(**{k: v for k, v in payload.items() if k in known},
                       portal_token=portal_token)
        except TypeError as exc:
            raise InvalidPayload(f"stored payload is incomplete: {exc}") from None


#: The fields of a Submission (``_from_checked`` takes a dict of exactly these).
_FIELD_NAMES = frozenset(f.name for f in fields(Submission))
