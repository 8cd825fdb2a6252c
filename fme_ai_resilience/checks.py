"""The one place a number or a name handed to the library is checked.

Every check raises :class:`~fme_ai_resilience.errors.ConfigurationError` naming the field and
the value, whether the value came from a setting, a published parameter or a function argument.
Booleans are not numbers here (``True`` is not a count), NaN is never finite, and a check
returns the value so that callers can write ``self.x = finite("x", x, minimum=0)``.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .errors import ConfigurationError

__all__ = ["finite", "count", "ratio", "name", "finite_number"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_FLOAT_MAX = float.fromhex("0x1.fffffffffffffp+1023")


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a bool). Never raises: an integer too large
    for a float (``10**400``) is finite here and compares exactly, without OverflowError."""
    return _is_number(value) and (isinstance(value, int) or math.isfinite(value))


def finite(field: str, value: Any, *, minimum: Optional[float] = None,
           above: Optional[float] = None, maximum: Optional[float] = None) -> float:
    """``value`` as a float when it is a finite number within the bounds given.

    ``minimum`` is inclusive, ``above`` exclusive, ``maximum`` inclusive. The reason names the
    bound that failed: "must be finite", "must be >= 0", "must be > 0", "must be <= 1".
    """
    if not _is_number(value):
        raise ConfigurationError(field, value, "must be a number")
    if not finite_number(value) or abs(value) > _FLOAT_MAX:   # 10**400 would overflow float()
        raise ConfigurationError(field, value, "must be finite")
    if minimum is not None and value < minimum:
        raise ConfigurationError(field, value, f"must be >= {minimum:g}")
    if above is not None and not value > above:
        raise ConfigurationError(field, value, f"must be > {above:g}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(field, value, f"must be <= {maximum:g}")
    return float(value)


def count(field: str, value: Any, *, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """``value`` when it is a whole number (an ``int``, not a bool) within the bounds."""
    if not (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigurationError(field, value, "must be a whole number")
    if value < minimum:
        raise ConfigurationError(field, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(field, value, f"must be <= {maximum}")
    return value


def ratio(field: str, value: Any, *, allow_zero: bool = True) -> float:
    """``value`` when it is a number between 0 and 1 (0 itself only with ``allow_zero``)."""
    if not _is_number(value) or not (0.0 <= value <= 1.0) or (value == 0 and not allow_zero):
        raise ConfigurationError(field, value, "must be between 0 and 1" if allow_zero
                                 else "must be > 0 and <= 1")
    return float(value)


def name(field: str, value: Any) -> str:
    """``value`` when it is a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(field, value, "must be a non-empty string")
    return value
