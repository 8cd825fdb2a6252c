"""FME's token encoding of text in workspace files, and XML escaping for the header.

FME writes a script (and other free text, such as a Logger's message) as one line, with
reserved characters replaced by tokens: ``a b`` -> ``a<space>b``, a newline -> ``<lf>``, ``å``
-> ``<u00e5>``. The table is the one docs/fme-flow.md describes, and encoding each decoded real
script again gives FME's bytes back. The header copy is then XML-escaped.
"""
from __future__ import annotations

import re
from typing import List

from ..errors import ConfigurationError

__all__ = ["TOKENS", "encode_fme", "decode_fme", "xml_escape"]

#: Characters FME writes as ``<token>`` (the round trip is verified on every real script).
TOKENS = {" ": "space", "\n": "lf", "'": "apos", '"': "quote", "(": "openparen",
          ")": "closeparen", ",": "comma", "[": "openbracket", "]": "closebracket",
          "{": "opencurly", "}": "closecurly", "$": "dollar", "/": "solidus", "\\": "backslash",
          "<": "lt", ">": "gt", "&": "amp", ";": "semicolon", "@": "at"}
_FROM_TOKEN = {token: char for char, token in TOKENS.items()}
#: ASCII characters FME leaves as they are: letters, digits and these (fmw-format.md, fme.md).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                   "#%*+-.:=?_~!^|")
_TOKEN = re.compile(r"<([A-Za-z0-9]+)>")
_UNICODE = re.compile(r"u[0-9a-fA-F]{4}")


def encode_fme(text: str) -> str:
    """``text`` in FME's token encoding (``a b`` -> ``a<space>b``, ``å`` -> ``<u00e5>``).

    Raises :class:`ConfigurationError` for a character whose encoding no saved workspace
    shows (a tab, a carriage return, a backtick, other control characters, characters beyond
    U+FFFF): better refused here than guessed and rejected by FME.
    """
    out: List[str] = []
    for char in text:
        if char in _PLAIN:
            out.append(char)
        elif char in TOKENS:
            out.append(f"<{TOKENS[char]}>")
        elif 0x80 <= ord(char) <= 0xFFFF and not 0xD800 <= ord(char) <= 0xDFFF:
            out.append(f"<u{ord(char):04x}>")
        else:
            raise ConfigurationError("text", char, "has no FME encoding seen in a saved "
                                                   "workspace; write it another way")
    return "".join(out)


def decode_fme(encoded: str) -> str:
    """The text behind FME's token encoding; raises :class:`ConfigurationError` for an
    unknown token or a bare ``<`` or ``>``."""
    out: List[str] = []
    position = 0
    for match in _TOKEN.finditer(encoded):
        out.append(_plain_run(encoded[position:match.start()]))
        token = match.group(1)
        if token in _FROM_TOKEN:
            out.append(_FROM_TOKEN[token])
        elif _UNICODE.fullmatch(token):
            out.append(chr(int(token[1:], 16)))
        else:
            raise ConfigurationError("encoded text", f"<{token}>", "is not an FME token")
        position = match.end()
    out.append(_plain_run(encoded[position:]))
    return "".join(out)


def _plain_run(run: str) -> str:
    for char in ("<", ">"):
        if char in run:
            raise ConfigurationError("encoded text", run[:40], f"has a bare {char!r}")
    return run


def xml_escape(value: str) -> str:
    """``value`` as an XML attribute value between double quotes (newlines as ``&#10;``)."""
    return (value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\n", "&#10;"))


