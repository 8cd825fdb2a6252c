"""Per-call time limits: how long one call to a remote service may take, phase by phase.

:class:`TimeoutBudget` is what the Vision AI client enforces: connect, TLS handshake, time to
first byte (server queue plus inference) and body read, each with its own limit in seconds.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..checks import MAX_SETTING_NUMBER, finite

__all__ = ["TimeoutBudget"]


@dataclass(frozen=True)
class TimeoutBudget:
    """Per-call time limits in seconds, one per phase (docs/vision.md).

    ``connect_s`` bounds the TCP handshake, ``tls_s`` the TLS handshake, ``ttfb_s`` the wait for
    the response headers (server queue plus inference), ``body_s`` reading the response body.
    """

    connect_s: float = 3.0
    tls_s: float = 3.0
    ttfb_s: float = 20.0
    body_s: float = 4.0

    def __post_init__(self) -> None:
        for f in fields(self):
            finite(f"timeouts.{f.name}", getattr(self, f.name), above=0,
                   maximum=MAX_SETTING_NUMBER)

    @property
    def total_s(self) -> float:
        """The longest one call can take when every phase uses its whole budget."""
        return self.connect_s + self.tls_s + self.ttfb_s + self.body_s
