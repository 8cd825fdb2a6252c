"""One prepared HTTP request to a Vision AI service: what the builders make and signers sign."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

__all__ = ["VisionRequest"]


@dataclass(frozen=True)
class VisionRequest:
    """One prepared HTTP request: method, URL, headers and body bytes."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes = b""

    def __repr__(self) -> str:
        return f"VisionRequest({self.method} {self.url}, {len(self.body)} bytes)"

    def with_headers(self, **extra: str) -> "VisionRequest":
        """A copy with ``extra`` headers added (underscores become hyphens)."""
        merged = dict(self.headers)
        merged.update({k.replace("_", "-"): v for k, v in extra.items()})
        return replace(self, headers=merged)
