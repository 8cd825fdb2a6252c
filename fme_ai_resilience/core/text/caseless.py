"""Names that compare without case: HTTP header names, and ArcGIS field names in attributes."""
from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["get_ignoring_case"]


def get_ignoring_case(mapping: Optional[Mapping[Any, Any]], name: str) -> Any:
    """``mapping[name]``, else the value under a key equal to ``name`` ignoring case, else None.

    ``Retry-After`` finds ``retry-after``; ``globalid`` finds ``GlobalID``.
    """
    if not mapping:
        return None
    if name in mapping:
        return mapping[name]
    lowered = name.lower()
    for key, value in mapping.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None
