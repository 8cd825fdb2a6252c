"""Recent webhook bodies and what they parsed to, so a redelivery of the same bytes skips the parse.

A webhook may arrive more than once: a proxy retries, FME Flow delivers again, an operator
replays a delivery. :class:`RecentBodies` remembers the submissions
:func:`~fme_ai_resilience.survey123.parse_webhook` made of the most recent bodies, keyed by
the raw bytes themselves (a lookup compares them whole: no digest can collide) together with
everything else the parse depends on: the
``X-Survey123-Event`` header and the parse limits. The ``X-Survey123-Delivery`` id is not part
of the key: a redelivery gets the remembered submissions bound to its own delivery id.

Bounds: at most ``size`` bodies (the least recently used goes first), none over
:data:`MAX_BODY_BYTES`, and ``max_total_bytes`` of raw body and event header between them, each
used for at most ``max_age_s`` seconds after its parse, on the caller's clock (``now``: this
module reads no clock). ``size=0`` turns the memo off. The memory held is a multiple of the
bytes counted: each entry also keeps the decoded submissions (a few times the body's size, up to
about 25 times for a body of many short attribute values).

Only successful parses are remembered: a body the parser refuses is parsed, and refused, again
every time. Bodies passed as already decoded objects bypass the memo.

The remembered bodies and submissions carry the submitter's portal token (the photo download
needs it), so the memo holds portal tokens in memory after ``max_age_s`` until the next call of
:meth:`~RecentBodies.parse` or :meth:`~RecentBodies.expire` (the gateway calls one of them on
every request, health checks included); a sweep also takes entries within an eighth of
``max_age_s`` of expiring, and every entry once the clock is seen going back.
:meth:`RecentBodies.clear` drops everything at once. ``repr`` shows counts only.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, Callable, List, Mapping, Optional, Tuple

from .errors import ConfigurationError
from .submission import Submission
from .survey123 import (DEFAULT_MAX_ATTACHMENTS, DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH,
                        EVENT_HEADER, Body, delivery_id_of, header_value, parse_webhook)

#: The raw body bytes all remembered bodies may add up to, by default (1 MiB: about 500 bodies
#: of the usual 2 KB).
DEFAULT_MAX_TOTAL_BYTES = 1024 * 1024
#: A body larger than this is parsed every time, never remembered (a Survey123 body is a few
#: KB; a large one would hold many times its size in decoded submissions).
MAX_BODY_BYTES = 64 * 1024
#: A sweep for expired entries also drops those this close to expiring (a share of
#: ``max_age_s``), so that sweeps stay rare under a steady stream of new bodies.
_SWEEP_SLACK = 0.125

Parser = Callable[..., List[Submission]]
_Key = Tuple[bytes, Optional[str], int, int, int, str, Parser]


class RecentBodies:
    """The parse of the most recent webhook bodies (see the module docstring).

    ``size`` is the most bodies kept (0: off), ``max_age_s`` how long after its parse an entry
    may be used, ``max_total_bytes`` the raw body and event header bytes all entries may add
    up to. Raises
    :class:`ConfigurationError` for a bad bound. Safe to share between threads: a lock guards
    the table, never the parse.
    """

    def __init__(self, size: int = 512, max_age_s: float = 600.0,
                 max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> None:
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0):
            raise ConfigurationError("intake.recent_bodies", size, "must be a whole number >= 0")
        if not (isinstance(max_age_s, (int, float)) and not isinstance(max_age_s, bool)
                and math.isfinite(max_age_s) and max_age_s > 0):
            raise ConfigurationError("intake.recent_body_max_age_s", max_age_s,
                                     "must be a finite number > 0")
        if not (isinstance(max_total_bytes, int) and not isinstance(max_total_bytes, bool)
                and max_total_bytes > 0):
            raise ConfigurationError("RecentBodies.max_total_bytes", max_total_bytes,
                                     "must be a whole number > 0")
        self._size = size
        self._max_age_s = float(max_age_s)
        self._max_total_bytes = max_total_bytes
        # key -> (parsed at, body length, submissions); least recently used first
        self._entries: "OrderedDict[_Key, Tuple[float, int, Tuple[Submission, ...]]]" = (
            OrderedDict())
        self._total_bytes = 0
        self._sweep_at = math.inf  # no entry can have expired before this time
        self._newest_at = -math.inf  # the latest parse time kept (a clock going back shows)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        """The most bodies remembered (0: the memo is off)."""
        return self._size

    @property
    def max_age_s(self) -> float:
        """How long after its parse an entry may be used, in seconds."""
        return self._max_age_s

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"RecentBodies(size={self._size}, max_age_s={self._max_age_s:g}, "
                f"entries={len(self._entries)}, hits={self.hits}, misses={self.misses})")

    def clear(self) -> None:
        """Forget every remembered body (and the portal tokens their submissions carry)."""
        with self._lock:
            self._entries.clear()
            self._total_bytes = 0
            self._sweep_at = math.inf
            self._newest_at = -math.inf

    def expire(self, now: float) -> None:
        """Drop the entries that have expired at ``now`` (and those about to). Cheap when none
        has: call it on every request so that tokens do not outstay ``max_age_s``."""
        if now > self._sweep_at or now < self._newest_at:
            with self._lock:
                self._sweep(now)

    def parse(self, body: Body, headers: Optional[Mapping[str, Any]], now: float, *,
              max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
              max_attachments: int = DEFAULT_MAX_ATTACHMENTS,
              asset_type_field: str = "asset_type",
              parser: Parser = parse_webhook) -> List[Submission]:
        """What ``parser(body, headers, ...)`` returns, from memory when these bytes were parsed
        with the same event header and limits less than ``max_age_s`` ago.

        ``now`` is the caller's clock in seconds. Raises what the parser raises (a refused body
        is never remembered).
        """
        if now > self._sweep_at or now < self._newest_at:
            with self._lock:
                self._sweep(now)
        raw = body if type(body) is bytes else _raw(body)
        event = None if raw is None else header_value(headers, EVENT_HEADER)
        if (raw is None or not self._size or len(raw) > min(MAX_BODY_BYTES, max_bytes,
                                                              self._max_total_bytes)
                or (event is not None and type(event) is not str)):
            # Off, already decoded, too large to keep, or an unusual header value.
            return parser(body, headers, max_bytes=max_bytes, max_depth=max_depth,
                          max_attachments=max_attachments, asset_type_field=asset_type_field)
        key = (raw, event, max_bytes, max_depth, max_attachments, asset_type_field, parser)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                if 0.0 <= now - entry[0] <= self._max_age_s:
                    self._entries.move_to_end(key)
                    self.hits += 1
                else:  # expired, or parsed "later" on a clock that went back
                    self._drop(key)
                    entry = None
            if entry is None:
                self.misses += 1
        if entry is not None:
            delivery_id = delivery_id_of(headers)
            return [s.with_delivery_id(delivery_id) for s in entry[2]]
        # The bytes of the key are what is parsed (a bytearray changed meanwhile cannot be
        # remembered under the wrong key; a str is not encoded twice).
        submissions = parser(raw, headers, max_bytes=max_bytes, max_depth=max_depth,
                             max_attachments=max_attachments, asset_type_field=asset_type_field)
        length = len(raw) + (len(event) if event else 0)
        entries = self._entries
        with self._lock:
            if key in entries:  # another thread parsed the same body meanwhile
                self._drop(key)
            entries[key] = (now, length, tuple(submissions))
            self._total_bytes += length
            if now + self._max_age_s < self._sweep_at:
                self._sweep_at = now + self._max_age_s
            if now > self._newest_at:
                self._newest_at = now
            while len(entries) > self._size or self._total_bytes > self._max_total_bytes:
                _, (_, dropped, _) = entries.popitem(last=False)
                self._total_bytes -= dropped
        return submissions

    # -- the table (called with the lock held) ------------------------------------------------
    def _drop(self, key: _Key) -> None:
        _, length, _ = self._entries.pop(key)
        self._total_bytes -= length

    def _sweep(self, now: float) -> None:
        """Drop every entry that has expired or is about to; note when the next one will."""
        horizon = self._max_age_s * (1.0 - _SWEEP_SLACK)
        stale = []
        oldest, newest = math.inf, -math.inf
        for key, (at, _, _) in self._entries.items():
            if 0.0 <= now - at <= horizon:
                oldest, newest = min(oldest, at), max(newest, at)
            else:
                stale.append(key)
        for key in stale:
            self._drop(key)
        self._sweep_at, self._newest_at = oldest + self._max_age_s, newest


def _raw(body: Body) -> Optional[bytes]:
    """The bytes the parser reads for ``body``, or None for an already decoded object."""
    if type(body) is bytes:
        return body
    if isinstance(body, str):
        return body.encode("utf-8", errors="surrogatepass")  # as the parser encodes it
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    return None


__all__ = ["RecentBodies", "DEFAULT_MAX_TOTAL_BYTES", "MAX_BODY_BYTES"]
