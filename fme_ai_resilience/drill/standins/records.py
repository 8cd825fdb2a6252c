"""What the feature layer stand-in holds: a submitted feature and its photos, as frozen values.

:class:`FeatureRecord` is what ``FeatureLayerStandIn.add_feature`` returns and what
``Survey123Sender.body_for`` turns into a webhook body; the field names are the layer's.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Tuple

__all__ = ["FeatureRecord", "AttachmentRecord", "OBJECT_ID_FIELD", "GLOBAL_ID_FIELD", "CREATOR"]

OBJECT_ID_FIELD = "objectid"
GLOBAL_ID_FIELD = "globalid"
#: The user every stand-in feature is created by.
CREATOR = "field_user_7"


@dataclass(frozen=True)
class AttachmentRecord:
    """One photo attached to a feature: ids, names and the bytes it serves."""

    id: int
    global_id: str
    parent_global_id: str
    parent_object_id: int
    name: str
    content_type: str
    keywords: str
    url: str
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class FeatureRecord:
    """One submitted feature as the layer created it (a copy: later edits do not change it).

    ``attributes`` are the crew's values plus the object id and GlobalID (what a webhook
    carries); ``created_at_ms`` is its ``CreationDate``.
    """

    object_id: int
    global_id: str
    attributes: Mapping[str, Any]
    created_at_ms: int
    geometry: Mapping[str, Any]
    attachments: Tuple[AttachmentRecord, ...]
    service_url: str
    layer_id: int = 0
    layer_name: str = "inspection"

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))
        object.__setattr__(self, "geometry", MappingProxyType(dict(self.geometry)))

    @property
    def layer_url(self) -> str:
        return f"{self.service_url}/{self.layer_id}"
