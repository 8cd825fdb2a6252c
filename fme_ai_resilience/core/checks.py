"""The one place a number or a name handed to the library is checked.

Every check raises :class:`~fme_ai_resilience.core.errors.ConfigurationError` naming the field and
the value, whether the value came from a setting, a published parameter or a function argument.
Booleans are not numbers here (``True`` is not a count), NaN is never finite (every check
refuses ``inf`` and ``nan`` with "must be finite"), and a check returns the value so that
callers can write ``self.x = finite("x", x, minimum=0)``.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from .errors import ConfigurationError

__all__ = ["finite", "count", "ratio", "name", "read_number", "read_count", "finite_number",
           "hostname_problem", "ascii_name", "MAX_NAME_CHARS", "MAX_SETTING_NUMBER"]

#: The largest duration or other non-count number a setting may hold (seconds: about 31
#: years). Past it nothing a deployment means is expressed, and sums of such values overflow.
MAX_SETTING_NUMBER = 1e9
#: The longest name (of a service, a circuit) the library accepts.
MAX_NAME_CHARS = 128
_ASCII_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")

_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)",
                      re.IGNORECASE)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _refuse_non_finite(field: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(field, value, "must be finite")


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
    _refuse_non_finite(field, value)
    if not (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigurationError(field, value, "must be a whole number")
    if value < minimum:
        raise ConfigurationError(field, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(field, value, f"must be <= {maximum}")
    return value


def ratio(field: str, value: Any, *, allow_zero: bool = True) -> float:
    """``value`` when it is a number between 0 and 1 (0 itself only with ``allow_zero``)."""
    _refuse_non_finite(field, value)
    if not _is_number(value) or not (0.0 <= value <= 1.0) or (value == 0 and not allow_zero):
        raise ConfigurationError(field, value, "must be between 0 and 1" if allow_zero
                                 else "must be > 0 and <= 1")
    return float(value)


def name(field: str, value: Any) -> str:
    """``value`` when it is a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(field, value, "must be a non-empty string")
    return value


def ascii_name(field: str, value: Any) -> str:
    """``value`` when it is a name in ASCII letters, digits and ``_ . : -`` (a letter or
    digit first) of at most :data:`MAX_NAME_CHARS` characters."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(field, value, "must be a non-empty name")
    if len(value) > MAX_NAME_CHARS:
        raise ConfigurationError(field, value[:40] + "…",
                                 f"is longer than {MAX_NAME_CHARS} characters")
    if not (value.isascii() and _ASCII_NAME.fullmatch(value)):
        raise ConfigurationError(field, value, "must be ASCII letters, digits and _ . : - "
                                 "(a letter or digit first)")
    return value


def read_number(field: str, text: str) -> float:
    """``text`` read as a finite number written in ASCII digits (``15``, ``0.25``, ``1e3``).

    ``float`` alone also takes ``1_0`` and other scripts' digits; this refuses them, and
    ``inf``/``nan`` with "must be finite".
    """
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ConfigurationError(field, text, f"not a number in ASCII digits: {stripped!r}")
    return finite(field, float(stripped))


def read_count(field: str, text: str) -> int:
    """``text`` read as a whole number written in ASCII digits (``inf``: "must be finite")."""
    stripped = text.strip()
    if _DECIMAL.fullmatch(stripped) and not math.isfinite(float(stripped)):
        raise ConfigurationError(field, text, "must be finite")
    if not _WHOLE.fullmatch(stripped):
        raise ConfigurationError(field, text, "must be a whole number in ASCII digits")
    return int(stripped)


_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def hostname_problem(host: str, *, numeric_last_label: bool = False) -> Optional[str]:
    """Why ``host`` (lower case, no trailing dot) is not a DNS host name, or None.

    The grammar of RFC 1123: labels of 1-63 letters, digits and hyphens (no hyphen first or
    last), 253 characters in all, and a last label that is not all digits (``10.1``,
    ``2130706433`` are numbers, not names) unless ``numeric_last_label``. IP literals are the
    caller's to recognise first.
    """
    if not isinstance(host, str) or not host:
        return "it is empty"
    if len(host) > 253:
        return "it is longer than 253 characters"
    labels = host.split(".")
    bad = next((label for label in labels if not _LABEL.match(label)), None)
    if bad is not None:
        return (f"label {bad[:70]!r} is not 1-63 letters, digits and hyphens "
                "(no hyphen first or last)")
    if labels[-1].isdigit() and not numeric_last_label:
        return "its last label is all digits"
    return None
