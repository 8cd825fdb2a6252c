"""Text every backend can store: NUL characters and unpaired surrogates replaced by U+FFFD.

PostgreSQL cannot hold a NUL in ``text`` or ``jsonb`` (psycopg2 refuses it before sending),
SQLite can; no driver can encode a lone surrogate (a JSON body's ``"\\ud83d"`` parses into
one). Cleaning every text parameter and every string inside JSON values before the driver
sees them makes both backends store, and hand back, the same text.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional

__all__ = ["REPLACEMENT", "clean_text", "clean_json", "needs_cleaning", "clean_value",
           "clean_params"]

#: U+FFFD REPLACEMENT CHARACTER, what an unstorable character becomes.
REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: str) -> str:
    """``value`` with NUL and unpaired surrogates as U+FFFD; a surrogate pair joined into one."""
    if value.isascii():
        return value.replace("\x00", REPLACEMENT) if "\x00" in value else value
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT)
    if _SURROGATE.search(value) is None:
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_json(value: Any) -> Any:
    """A JSON-ready value with every string (keys too) cleaned; other values unchanged."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_json(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value


def needs_cleaning(json_text: str) -> bool:
    """Whether JSON text (as ``json.dumps`` writes it) holds a NUL or a surrogate."""
    if "\\u0000" in json_text:
        return True
    return not json_text.isascii() and _SURROGATE.search(json_text) is not None


def clean_value(value: Any) -> Any:
    """A statement parameter as it can be stored: text cleaned, anything else unchanged."""
    return clean_text(value) if isinstance(value, str) else value


def clean_params(params: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Statement parameters with every text value cleaned (the same mapping if none needs it)."""
    if not params:
        return {}
    cleaned = {k: clean_text(v) for k, v in params.items() if isinstance(v, str)}
    changed = {k: v for k, v in cleaned.items() if v is not params[k]}
    return {**params, **changed} if changed else params
