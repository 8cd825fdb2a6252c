"""Keep a Survey123 -> FME Flow -> Vision AI pipeline whole under bursts, duplicates and outages.

The public names most users need are re-exported here; everything else lives in the module
named for what it holds (see docs/ for the map).
"""
from __future__ import annotations

__version__ = "0.1.0"

from .clock import Clock, Deadline, FakeClock, SystemClock
from .errors import (
    ConfigurationError,
    ErrorClass,
    FailureClass,
    InvalidPayload,
    ResilienceError,
)
from .settings import Settings

__all__ = [
    "__version__",
    "Clock",
    "ConfigurationError",
    "Deadline",
    "ErrorClass",
    "FailureClass",
    "FakeClock",
    "InvalidPayload",
    "ResilienceError",
    "Settings",
    "SystemClock",
]
