"""Text from outside made safe to log, answer and store: control characters escaped.

A header value or a name taken from a body can carry a line break (an obs-fold header through a
lenient server, ``%0A`` in a path, NEL ``\\x85``, U+2028) or a terminal escape. Written as they
are, they forge log lines and garble the ledger's text. :func:`printable` replaces each such
character with a visible escape (``\\x0a``, ``\\u2028``); everything else is kept as sent.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["printable", "CONTROL_CHARACTERS"]

#: C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators: every
#: character ``str.splitlines`` breaks at, and the terminal escapes.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any) -> str:
    """``text`` (or ``str(text)``) with every control character escaped; never raises."""
    out = text if isinstance(text, str) else str(text)
    return CONTROL_CHARACTERS.sub(_escape, out) if CONTROL_CHARACTERS.search(out) else out
