"""The SQL ``where`` clauses the feature layer stand-in reads, as predicates on a feature.

The grammar is the part of ArcGIS's standardized SQL a reconciler and an attachment lookup
use: comparisons (``=``, ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) between fields and
literals (numbers, ``'text'`` with ``''`` for a quote, ``timestamp 'YYYY-MM-DD HH:MM:SS'``
or ``date '...'`` as epoch milliseconds, UTC), ``field [NOT] IN (literal, ...)``,
``field IS [NOT] NULL``, ``field [NOT] LIKE 'pat%'``, ``AND``, ``OR``, ``NOT`` and
parentheses; ``1=1`` is a comparison of two literals. Keywords and field names are
case-insensitive; text compares without case (as on a hosted layer's database). A GlobalID
field compares by GUID (``'{ab..}'`` equals ``'{AB..}'``); a date field compared with text
reads the text as a timestamp. Anything else raises :class:`WhereError`.
"""
from __future__ import annotations

import operator
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Collection, List, Mapping, Optional, Tuple

from ...core.errors import InvalidPayload
from ...core.intake.keys import normalise_global_id
from .server import StandInError

__all__ = ["WhereError", "Predicate", "parse_where", "timestamp_ms", "braced_global_id"]

#: A parsed where clause: True when a feature's attributes (canonical field names) match.
Predicate = Callable[[Mapping[str, Any]], bool]

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<op><>|!=|>=|<=|=|<|>)
  | (?P<punct>[(),])
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
)""", re.VERBOSE)
_OPS = {"=": operator.eq, "<>": operator.ne, "!=": operator.ne, "<": operator.lt,
        "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_KEYWORDS = {"and", "or", "not", "in", "is", "null", "like", "timestamp", "date"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


class WhereError(StandInError):
    """A where clause the stand-in cannot read."""


def timestamp_ms(text: str) -> int:
    """``'YYYY-MM-DD[ HH:MM[:SS[.fff]]]'`` (UTC) as epoch milliseconds; raises WhereError."""
    for fmt in _FORMATS:
        try:
            moment = datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        return (moment - _EPOCH) // timedelta(milliseconds=1)
    raise WhereError(f"{text!r} is not a timestamp (YYYY-MM-DD HH:MM:SS)")


def braced_global_id(value: Any) -> str:
    """A GlobalID as Survey123 sends it: upper case in braces; raises WhereError."""
    try:
        return "{" + normalise_global_id(value).upper() + "}"
    except InvalidPayload:
        raise WhereError(f"{value!r} is not a GlobalID") from None


def _tokens(text: str) -> List[Tuple[str, str]]:
    out, pos = [], 0
    while True:
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            rest = text[pos:].strip()
            if rest:
                raise WhereError(f"cannot read the where clause at {rest[:30]!r}")
            return out
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()


Operand = Tuple[str, Any]  # ("field", canonical name) or ("lit", value)


class _Parser:
    def __init__(self, text: str, fields: Mapping[str, str], guid_fields: Collection[str],
                 date_fields: Collection[str]) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.fields = fields
        self.guid_fields = set(guid_fields)
        self.date_fields = set(date_fields)

    # token helpers
    def peek(self, offset: int = 0) -> Tuple[str, str]:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else ("end", "")

    def keyword(self, word: str, offset: int = 0) -> bool:
        kind, value = self.peek(offset)
        return kind == "word" and value.lower() == word

    def take(self, kind: str, value: Optional[str] = None) -> str:
        got_kind, got = self.peek()
        if got_kind != kind or (value is not None and got.lower() != value):
            want = value or kind
            raise WhereError(f"expected {want!r}, found {got or 'the end'!r}")
        self.pos += 1
        return got

    # grammar
    def parse(self) -> Predicate:
        if not self.tokens:
            return lambda attrs: True
        predicate = self.disjunction()
        if self.pos != len(self.tokens):
            raise WhereError(f"unexpected {self.peek()[1]!r}")
        return predicate

    def disjunction(self) -> Predicate:
        parts = [self.conjunction()]
        while self.keyword("or"):
            self.pos += 1
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda a: any(p(a) for p in parts))

    def conjunction(self) -> Predicate:
        parts = [self.negation()]
        while self.keyword("and"):
            self.pos += 1
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda a: all(p(a) for p in parts))

    def negation(self) -> Predicate:
        if self.keyword("not"):
            self.pos += 1
            inner = self.negation()
            return lambda a: not inner(a)
        if self.peek() == ("punct", "("):
            self.pos += 1
            inner = self.disjunction()
            self.take("punct", ")")
            return inner
        return self.condition()

    def condition(self) -> Predicate:
        left = self.operand()
        negated = False
        if self.keyword("not") and (self.keyword("in", 1) or self.keyword("like", 1)):
            self.pos += 1
            negated = True
        if self.keyword("in"):
            self.pos += 1
            predicate = self.member(left)
        elif self.keyword("like"):
            self.pos += 1
            predicate = self.like(left)
        elif self.keyword("is"):
            self.pos += 1
            negated = self.keyword("not")
            if negated:
                self.pos += 1
            self.take("word", "null")
            get = self.getter(left)
            predicate = lambda a: get(a) is None  # noqa: E731
        else:
            kind, op = self.peek()
            if kind != "op":
                raise WhereError(f"expected a comparison after {left[1]!r}")
            self.pos += 1
            right = self.operand()
            predicate = self.comparison(left, _OPS[op], right)
        return (lambda a: not predicate(a)) if negated else predicate

    def operand(self) -> Operand:
        kind, value = self.peek()
        if kind == "word" and value.lower() in ("timestamp", "date"):
            self.pos += 1
            return ("lit", timestamp_ms(_unquote(self.take("str"))))
        if kind == "word" and value.lower() not in _KEYWORDS:
            self.pos += 1
            canonical = self.fields.get(value.lower())
            if canonical is None:
                raise WhereError(f"Invalid field: {value}")
            return ("field", canonical)
        if kind == "str":
            self.pos += 1
            return ("lit", _unquote(value))
        if kind == "num":
            self.pos += 1
            return ("lit", float(value) if "." in value else int(value))
        raise WhereError(f"expected a field or a value, found {value or 'the end'!r}")

    def literal(self) -> Any:
        operand = self.operand()
        if operand[0] != "lit":
            raise WhereError(f"expected a value, found the field {operand[1]!r}")
        return operand[1]

    # building predicates
    def coerce(self, field_name: Optional[str], value: Any) -> Any:
        """A literal as the field's values are stored (GUIDs braced, dates in ms)."""
        if field_name in self.guid_fields and isinstance(value, str):
            return braced_global_id(value)
        if field_name in self.date_fields and isinstance(value, str):
            return timestamp_ms(value)
        return value

    def getter(self, operand: Operand) -> Callable[[Mapping[str, Any]], Any]:
        if operand[0] == "field":
            name = operand[1]
            return lambda a: a.get(name)
        value = operand[1]
        return lambda a: value

    def comparison(self, left: Operand, op: Callable[[Any, Any], bool],
                   right: Operand) -> Predicate:
        if left[0] == "field" and right[0] == "lit":
            right = ("lit", self.coerce(left[1], right[1]))
        elif right[0] == "field" and left[0] == "lit":
            left = ("lit", self.coerce(right[1], left[1]))
        get_left, get_right = self.getter(left), self.getter(right)
        return lambda a: _compare(op, get_left(a), get_right(a))

    def member(self, left: Operand) -> Predicate:
        self.take("punct", "(")
        field_name = left[1] if left[0] == "field" else None
        values = [self.coerce(field_name, self.literal())]
        while self.peek() == ("punct", ","):
            self.pos += 1
            values.append(self.coerce(field_name, self.literal()))
        self.take("punct", ")")
        get = self.getter(left)
        return lambda a: any(_compare(operator.eq, get(a), v) for v in values)

    def like(self, left: Operand) -> Predicate:
        pattern = self.literal()
        if not isinstance(pattern, str):
            raise WhereError("LIKE needs a text pattern")
        regex = re.compile("".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch)
                                   for ch in pattern), re.IGNORECASE | re.DOTALL)
        get = self.getter(left)
        return lambda a: isinstance(get(a), str) and regex.fullmatch(get(a)) is not None


def _unquote(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _compare(op: Callable[[Any, Any], bool], left: Any, right: Any) -> bool:
    if left is None or right is None:
        return False
    if isinstance(left, str) and isinstance(right, str):
        return bool(op(left.casefold(), right.casefold()))
    numbers = (int, float)
    if isinstance(left, numbers) and isinstance(right, numbers) \
            and not isinstance(left, bool) and not isinstance(right, bool):
        return bool(op(left, right))
    return False


def parse_where(text: Optional[str], fields: Mapping[str, str], *,
                guid_fields: Collection[str] = (), date_fields: Collection[str] = ()) -> Predicate:
    """The predicate of where clause ``text`` (empty or None: every feature).

    ``fields`` maps each lower-case field name to its canonical spelling (the attribute key);
    ``guid_fields`` and ``date_fields`` name (canonically) the GlobalID and date fields.
    Raises :class:`WhereError` saying what it cannot read.
    """
    return _Parser(text or "", fields, guid_fields, date_fields).parse()
