"""Bounded decoding of JSON bodies nobody vouches for (webhooks, answers of remote services).

:func:`decode_value` turns raw bytes or text into plain JSON values within a size limit and a
nesting limit, and refuses a body that is not UTF-8 or holds a number no float can hold
(``NaN``, ``Infinity``, ``1e999``, an integer of more than 308 digits, which would also cost
quadratic time to convert). :func:`decode_object` does the same for a body that must be a JSON
object, and also refuses what a ledger cannot store: a NUL character or an unpaired UTF-16
surrogate escape. Every refusal is an :class:`~fme_ai_resilience.core.errors.InvalidPayload` saying
what is wrong. The nesting limit is checked without recursion, before decoding, so no depth of
brackets can exhaust the stack; :func:`deeper_than` checks a value decoded elsewhere the same
way.

:func:`body_bytes` is the one way a body becomes bytes: for hashing, excerpts and the parse.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, List, Union

from ..errors import InvalidPayload

__all__ = ["Body", "body_bytes", "cut_short", "decode_object", "decode_value", "deeper_than",
           "json_type", "MAX_INT_DIGITS"]

Body = Union[bytes, bytearray, memoryview, str, Mapping]

_BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def body_bytes(body: Any) -> bytes:
    """The bytes of ``body``: bytes as they are, text as UTF-8, anything else as JSON (or its
    ``repr`` when it is not JSON-ready). Never raises."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        # surrogatepass: a lone surrogate survives as bytes, to be refused by the decoder
        return body.encode("utf-8", errors="surrogatepass")
    try:
        return json.dumps(body, sort_keys=True, allow_nan=False,
                          ensure_ascii=False).encode("utf-8", errors="surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return repr(body).encode("utf-8", errors="replace")


def _reject_constant(name: str) -> Any:
    raise InvalidPayload(f"not JSON: {name} is not a JSON number")


#: The most digits an integer may have: beyond it no float can hold it (10**308 < max < 10**309).
MAX_INT_DIGITS = 308


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InvalidPayload("a number is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:   # refused before the (quadratic) conversion
        raise InvalidPayload("a number is out of range")
    return int(text)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            parse_int=_bounded_int)


def decode_object(body: Body, *, max_bytes: int, max_depth: int) -> dict:
    """``body`` decoded into plain dicts and lists: a JSON object of at most ``max_bytes``
    bytes, nested at most ``max_depth`` levels deep.

    A mapping is encoded and decoded again, so that every body meets the same limits and the
    caller only ever sees ``dict`` and ``list``. Raises :class:`InvalidPayload`.
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str, Mapping)):
        raise InvalidPayload(f"body must be bytes, text or an object, got {type(body).__name__}")
    text = _text_of(body_bytes(body), max_bytes)
    if "\x00" in text:
        raise InvalidPayload("contains a NUL character")
    data = _decode(text, max_depth)
    if "\\u" in text:
        if "\\u0000" in text and _has_nul(data):
            # PostgreSQL text and jsonb cannot hold NUL; a literal backslash-u0000 is fine.
            raise InvalidPayload("contains a NUL character")
        if _SURROGATE_ESCAPE.search(text):
            try:
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidPayload("contains an unpaired UTF-16 surrogate escape") from None
    if not isinstance(data, dict):
        raise InvalidPayload(f"not a JSON object but {json_type(data)}")
    return data


def decode_value(body: Union[bytes, bytearray, memoryview, str], *, max_bytes: int,
                 max_depth: int) -> Any:
    """The JSON value in ``body`` (bytes or text), of at most ``max_bytes`` bytes and nested at
    most ``max_depth`` levels deep: for answers of remote services, which may be any value.

    Raises :class:`InvalidPayload` (not UTF-8, empty, not JSON, too large, too deep, a number
    out of range); never RecursionError or OverflowError.
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str)):
        raise InvalidPayload(f"body must be bytes or text, got {type(body).__name__}")
    return _decode(_text_of(body_bytes(body), max_bytes), max_depth)


def _text_of(raw: bytes, max_bytes: int) -> str:
    if len(raw) > max_bytes:
        raise InvalidPayload(f"body of {len(raw)} bytes is over the limit of {max_bytes}")
    if not raw.strip():
        raise InvalidPayload("empty body")
    try:
        return raw.decode("utf-8-sig" if raw.startswith(_BOM) else "utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPayload(f"not UTF-8 text (byte {exc.start})") from None


def _decode(text: str, max_depth: int) -> Any:
    if _nesting_over(text, max_depth):
        raise InvalidPayload(f"nesting deeper than {max_depth} levels")
    try:
        return _DECODER.decode(text)
    except InvalidPayload:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidPayload(f"not JSON: {_json_reason(exc)}") from None


def cut_short(text: str) -> bool:
    """Whether ``text`` is the start of a JSON object, array or string that ends before it is
    whole (an answer cut off in transit), rather than text that is no JSON: it opens with
    ``{``, ``[`` or ``"``, never closes a bracket it did not open, and ends inside a string or
    with a bracket still open."""
    body = text.lstrip()
    if not body or body[0] not in '{["':
        return False
    in_string, escaped = False, False
    closing = {"}": "{", "]": "["}
    opened: List[str] = []
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            opened.append(char)
        elif char in closing:
            if not opened or opened.pop() != closing[char]:
                return False
            if not opened:
                return False   # a whole value closed: whatever follows is not a cut
    return in_string or bool(opened)


def deeper_than(value: Any, max_depth: int) -> bool:
    """Whether a decoded value (dicts and lists) nests deeper than ``max_depth`` levels.

    Walked without recursion, so it answers for any depth; ``{}`` and ``[]`` are one level.
    """
    stack: List[Any] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _nesting_over(text: str, max_depth: int) -> bool:
    """Whether the brackets of ``text`` (outside strings) nest deeper than ``max_depth``.

    Scanned before decoding, so the decoder never recurses past the limit; a text with no more
    openers than the limit needs no scan at all.
    """
    if text.count("{") + text.count("[") <= max_depth:
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > max_depth:
                return True
        elif char in "}]":
            depth -= 1
    return False


def _json_reason(exc: BaseException) -> str:
    msg = getattr(exc, "msg", None)
    pos = getattr(exc, "pos", None)
    return f"{msg} at character {pos}" if msg is not None else type(exc).__name__


def json_type(value: Any) -> str:
    """How a decoded JSON value is named in messages ("an array", "a string", "null" ...)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def _has_nul(data: Any) -> bool:
    """Whether any decoded string (key or value) holds a NUL character (iterative)."""
    stack: List[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False

