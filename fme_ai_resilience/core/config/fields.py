"""The checks every settings group runs on its fields, each failure a ConfigurationError naming
``group.field`` and the value (the groups live beside the policies that read them; docs/
configuration.md lists them)."""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

from ..checks import MAX_SETTING_NUMBER, count, finite, ratio
from ..errors import ConfigurationError

__all__ = ["MAX_COUNT", "MAX_COUNTS", "check_field", "is_number", "positive_fields",
           "ratio_fields", "enum_field", "name_fields"]

#: The largest count any setting may hold (the ledger stores counts as 32-bit integers).
MAX_COUNT = 2 ** 31 - 1
#: Tighter maxima of particular counts: a half-open round creates one ledger row per probe.
MAX_COUNTS = {"half_open_probes": 1000}


def check_field(group: str, name: str, value: Any, ok: bool, reason: str) -> None:
    """Raise ConfigurationError for ``group.name`` unless ``ok``."""
    if not ok:
        raise ConfigurationError(f"{group}.{name}", value, reason)


def is_number(value: Any) -> bool:
    """A real number, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_fields(group: str, obj: Any, *names: str, allow_zero: bool = False) -> None:
    """Counts and durations that must be > 0 (or >= 0 with ``allow_zero``) and finite."""
    whole = {f.name for f in dataclasses.fields(obj) if f.type in ("int", int)}
    for name in names:
        label, value = f"{group}.{name}", getattr(obj, name)
        if name in whole:
            count(label, value, minimum=0 if allow_zero else 1,
                  maximum=MAX_COUNTS.get(name, MAX_COUNT))
        elif allow_zero:
            finite(label, value, minimum=0, maximum=MAX_SETTING_NUMBER)
        else:
            finite(label, value, above=0, maximum=MAX_SETTING_NUMBER)


def ratio_fields(group: str, obj: Any, *names: str, allow_zero: bool = True) -> None:
    """Fields that must lie in [0, 1] (or (0, 1] without ``allow_zero``)."""
    for name in names:
        ratio(f"{group}.{name}", getattr(obj, name), allow_zero=allow_zero)


def enum_field(group: str, obj: Any, name: str, kind: "type[enum.Enum]") -> None:
    """An enum field given by value (``"full"``) or as the member, stored as the member."""
    value = getattr(obj, name)
    try:
        object.__setattr__(obj, name, kind(value))
    except ValueError:
        raise ConfigurationError(f"{group}.{name}", value,
                                 f"must be one of {[m.value for m in kind]}") from None


def name_fields(group: str, obj: Any, *names: str) -> None:
    """Tuple-of-names fields: a list or tuple of strings, stored as a tuple."""
    for name in names:
        value = getattr(obj, name)
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        check_field(group, name, value, ok, "must be a list of names")
        object.__setattr__(obj, name, tuple(value))
