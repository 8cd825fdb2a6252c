"""The intake decision: a webhook body in, the ledger updated, an HTTP answer out.

:func:`decide` implements the status contract (seed section 2.3, shared/DESIGN.md section 3):

======  =====================================================================================
202     a new photo registered (PENDING), or parked DEFERRED past the watermark (``park``
        mode, the default: Survey123 never retries a refused webhook), or a duplicate still
        in progress
200     every photo is a duplicate already finished (SUCCEEDED, or DEAD: the fact is recorded
        and the compensator requeues dead letters)
429     the body could not be stored as a whole: over the watermark in ``reject`` mode, or
        over the park ceiling in ``park`` mode; ``Retry-After`` from Little's law
400     the body is invalid (or the parser failed on it in any unexpected way); a DEAD row
        keyed by the body's SHA-256 keeps the redacted excerpt and the reason
503     the ledger is unreachable, or FME Flow reports no engine capacity; ``Retry-After``
======  =====================================================================================

A body with several photos is answered as a whole, and is not split: once any of its photos
is in the ledger (new or from an earlier delivery), photos the backlog check refused are
stored too, parked DEFERRED past the park ceiling, so a partly stored body loses nothing.
Only a body none of whose photos could be stored is refused. That "never split" path still
has a hard ceiling: the park ceiling plus ``max_attachments`` (one whole body's worth of
headroom; a body holds at most ``max_attachments`` submissions, counting unlisted photo lists).
Past it (only when many partly stored bodies arrive at once) the refused photos stay out and
the answer is 429 with ``stored: true``: a sender that retries meets duplicates for the stored
photos and registers the rest. The answer's ``submissions`` lists the first
:data:`MAX_LISTED` registrations; ``submission_count`` gives the total.

When FME Flow reports no engine capacity the photos are registered against a watermark of
zero: in ``park`` mode they are stored DEFERRED and the answer is 503 (a retrying sender comes
back and meets a duplicate; Survey123 ignores the status and nothing is lost); in ``reject``
mode a body none of whose photos is in the ledger is refused with 503 and nothing stored,
while the new photos of a body partly in the ledger are parked DEFERRED with the rest (the
body is not split) and the answer is still 503. Duplicates are still answered 200/202.
"""
from __future__ import annotations

import functools
import json
import logging
import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .budget import CapacityPlan
from .errors import FailureClass, InvalidPayload, StoreUnavailable
from .keys import body_key
from .ledger import OverloadMode, RegisterOutcome, Registration
from .recent_bodies import RecentBodies
from .redact import excerpt, redact_text
from .settings import IntakeSettings, Settings
from .store.base import Store
from .submission import Submission
from .survey123 import Body, delivery_id_of, parse_webhook

log = logging.getLogger(__name__)

EXCERPT_CHARS = 2048
#: How many registrations a 202/429/503 answer lists by key (the rest are only counted).
MAX_LISTED = 50

_NEW = (RegisterOutcome.NEW, RegisterOutcome.PARKED)
_OVER = RegisterOutcome.OVER_BACKLOG
_DONE = RegisterOutcome.DUPLICATE_DONE
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class IntakeDecision:
    """The HTTP answer to one webhook delivery: status code, headers and a JSON body.

    ``registrations`` holds what the ledger answered for each photo, in body order.
    """

    status_code: int
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    registrations: Tuple[Registration, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.status_code, int) and 100 <= self.status_code <= 599):
            raise ValueError(f"status_code must be an HTTP status, got {self.status_code!r}")
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))
        object.__setattr__(self, "body", MappingProxyType(dict(self.body)))
        object.__setattr__(self, "registrations", tuple(self.registrations))

    @property
    def retry_after_s(self) -> Optional[int]:
        """The Retry-After header as whole seconds, or None."""
        value = self.headers.get("Retry-After")
        return int(value) if value is not None else None

    def body_bytes(self) -> bytes:
        """The JSON body, UTF-8 encoded."""
        return json.dumps(dict(self.body), separators=(",", ":"), sort_keys=True).encode("utf-8")


def _decided(status_code: int, headers: Optional[Dict[str, str]], body: Dict[str, Any],
             registrations: Sequence[Registration]) -> IntakeDecision:
    """An :class:`IntakeDecision` of dicts built here and handed over: wrapped read-only, not
    copied (the public constructor copies them, as its caller may keep and change its own)."""
    made = object.__new__(IntakeDecision)
    object.__setattr__(made, "__dict__", {
        "status_code": status_code,
        "headers": MappingProxyType(headers) if headers else _NO_HEADERS,
        "body": MappingProxyType(body), "registrations": tuple(registrations)})
    return made


FlowHealthSource = Union[None, Any, Callable[[], Any]]


def decide(body: Body, headers: Optional[Mapping[str, Any]], store: Store,
           settings: Optional[Settings] = None, now: float = 0.0,
           flow_health: FlowHealthSource = None,
           recent: Optional[RecentBodies] = None) -> IntakeDecision:
    """Parse, register and answer one webhook delivery (see the module docstring's table).

    ``store`` is a :class:`~fme_ai_resilience.store.Store`; ``now`` the epoch seconds of the
    injected clock; ``flow_health`` a ``FlowHealth`` (or a callable returning one, such as
    ``FlowClient.health``) or None to skip the engine check; ``recent`` a
    :class:`~fme_ai_resilience.recent_bodies.RecentBodies` to parse through, so that a
    redelivery of the same bytes is not parsed again (the answer is the same with or without
    it). Raises only what the store raises beyond :class:`StoreUnavailable` (a 503).
    """
    settings = settings or Settings()
    intake = settings.intake
    try:
        if recent is None:
            submissions = parse_webhook(body, headers, max_bytes=intake.max_body_bytes,
                                        max_depth=intake.max_depth,
                                        max_attachments=intake.max_attachments)
        else:
            submissions = recent.parse(body, headers, now, max_bytes=intake.max_body_bytes,
                                       max_depth=intake.max_depth,
                                       max_attachments=intake.max_attachments,
                                       parser=parse_webhook)
    except InvalidPayload as exc:
        return _invalid(body, headers, exc, store, settings, now)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the body as a 500
        log.error("intake: the parser failed on a body with %s; recording it as invalid",
                  type(exc).__name__)
        unreadable = InvalidPayload(f"the body could not be parsed ({type(exc).__name__})")
        return _invalid(body, headers, unreadable, store, settings, now)

    plan, mode, park_ceiling = _limits(intake)
    health = None if flow_health is None else _read_health(flow_health)
    no_capacity = health is not None and not health.has_capacity
    ceiling = 0 if no_capacity else plan.watermark
    registrations: List[Registration] = []
    try:
        _register_whole(store, submissions, now, ceiling, mode, park_ceiling,
                        park_ceiling + intake.max_attachments, registrations)
    except StoreUnavailable as exc:
        stored = [r.key for r in registrations if r.outcome is not RegisterOutcome.OVER_BACKLOG]
        log.error("intake: ledger unreachable after %d of %d photo(s) of %s: %s", len(stored),
                  len(submissions), submissions[0].feature_global_id, _safe(exc, submissions))
        return _unavailable(settings, "ledger unreachable", stored, registrations)
    return _answer(submissions, registrations, store, settings, plan, now, health, no_capacity)


def _register_whole(store: Any, submissions: Sequence[Submission], now: float, ceiling: int,
                    mode: OverloadMode, park_ceiling: int, hard_ceiling: int,
                    out: List[Registration]) -> None:
    """Register every photo; if the body is partly in the ledger, store the refused rest
    parked, up to ``hard_ceiling`` unfinished tasks."""
    any_refused = False
    for sub in submissions:
        registration = store.register(sub, now, ceiling, mode, park_ceiling)
        out.append(registration)
        any_refused = any_refused or registration.outcome is _OVER
    if not any_refused:
        return
    refused = [i for i, r in enumerate(out) if r.outcome is RegisterOutcome.OVER_BACKLOG]
    if len(refused) < len(out):
        for i in refused:
            out[i] = store.register(submissions[i], now, 0, OverloadMode.PARK, hard_ceiling)
        left = sum(1 for i in refused if out[i].outcome is RegisterOutcome.OVER_BACKLOG)
        log.warning("intake: %d photo(s) of %s over the ceiling parked with the rest of their "
                    "submission%s", len(refused) - left, submissions[0].feature_global_id,
                    f"; {left} refused past the hard ceiling of {hard_ceiling}" if left else "")


def _answer(submissions: Sequence[Submission], registrations: Sequence[Registration],
            store: Any, settings: Settings, plan: CapacityPlan, now: float,
            health: Any, no_capacity: bool) -> IntakeDecision:
    over = new = False
    all_done = True
    listing: List[Dict[str, Any]] = []
    for r in registrations:  # one pass; enum _value_ is .value without its Python descriptor
        outcome, status = r.outcome, r.status
        if outcome is _OVER:
            over = True
        elif outcome in _NEW:
            new = True
        if outcome is not _DONE:
            all_done = False
        if len(listing) < MAX_LISTED:
            listing.append({"key": r.key, "outcome": outcome._value_,
                            "status": None if status is None else status._value_})
    first = submissions[0]
    if over or (no_capacity and new):
        outcomes = [r.outcome for r in registrations]
        context = {"feature": first.feature_global_id, "delivery_id": first.delivery_id,
                   "submissions": listing, "submission_count": len(registrations)}
        rate = _drain_rate(store, settings, now)
        if no_capacity:
            backlog = plan.watermark + max(1, int(getattr(health, "queued", 0) or 0))
            status, state = 503, "no_engine_capacity"
        else:
            backlog = max([r.backlog for r in registrations]
                          + [_unfinished(store, plan.saturating_backlog(rate))])
            status, state = 429, "over_backlog"
        retry_after = plan.retry_after_s(backlog, rate)
        stored = any(o is not RegisterOutcome.OVER_BACKLOG for o in outcomes)
        log.warning("intake: %s for %s (trace %s, delivery %s): %d photo(s), %s, "
                    "Retry-After %ds", state, first.feature_global_id, first.trace_id,
                    first.delivery_id, len(outcomes),
                    "some stored" if stored else "nothing stored", retry_after)
        return _decided(status, {"Retry-After": str(retry_after)},
                        dict(context, status=state, stored=stored, retry_after_s=retry_after),
                        registrations)
    if new:
        status, state = 202, "accepted"
    elif all_done:
        status, state = 200, "duplicate_done"
    else:
        status, state = 202, "duplicate_in_progress"
    if log.isEnabledFor(logging.INFO):
        more = len(registrations) - MAX_LISTED
        log.info("intake: %s %s (delivery %s): %s%s", state, first.feature_global_id,
                 first.delivery_id, ", ".join(f"{r.key} {r.outcome.value} trace "
                                              f"{s.trace_id}" for r, s in
                                              zip(registrations[:MAX_LISTED], submissions)),
                 f" and {more} more" if more > 0 else "")
    return _decided(status, None, {
        "feature": first.feature_global_id, "delivery_id": first.delivery_id,
        "submissions": listing, "submission_count": len(registrations), "status": state,
        "stored": True}, registrations)


def _invalid(body: Body, headers: Optional[Mapping[str, Any]], exc: InvalidPayload,
             store: Any, settings: Settings, now: float) -> IntakeDecision:
    """400, with the evidence kept as a dead letter keyed by the body's hash."""
    raw = _raw_bytes(body)
    token = _token_of(raw, settings.intake.max_body_bytes)
    reason = redact_text(str(exc), [token])
    key = body_key(raw)
    delivery = delivery_id_of(headers)
    payload = {"reason": reason, "bytes": len(raw), "delivery_id": delivery,
               "excerpt": excerpt(raw, EXCERPT_CHARS, [token]).replace("\x00", "\ufffd")}
    try:
        stored = store.record_dead_letter(key, payload, FailureClass.INVALID_PAYLOAD, reason,
                                          now, trace_id=key[-16:])
    except StoreUnavailable as err:
        log.error("intake: invalid body %s (%s) and the ledger is unreachable: %s", key,
                  reason, redact_text(str(err), [token]))
        return _unavailable(settings, "ledger unreachable", [], [])
    log.warning("intake: invalid body %s (delivery %s): %s%s", key, delivery, reason,
                "" if stored else " (already recorded)")
    return IntakeDecision(400, {}, {"status": "invalid", "reason": reason,
                                    "dead_letter": key, "delivery_id": delivery})


def _unavailable(settings: Settings, reason: str, stored: Sequence[str],
                 registrations: Sequence[Registration]) -> IntakeDecision:
    """503 while the ledger is down: no backlog to measure, so one mean processing time."""
    retry_after = max(1, math.ceil(settings.intake.mean_processing_s))
    return IntakeDecision(503, {"Retry-After": str(retry_after)},
                          {"status": "unavailable", "reason": reason, "stored": list(stored),
                           "retry_after_s": retry_after}, registrations)


@functools.lru_cache(maxsize=16)
def capacity_limits(intake: IntakeSettings) -> Tuple[CapacityPlan, OverloadMode, int]:
    """The capacity plan with the effective watermark, the overload mode and the park ceiling.

    The park ceiling is ``park_ceiling_factor`` x the watermark (never below it). Settings are
    frozen, so the answer is cached.
    """
    plan = intake.capacity()
    if intake.watermark != 0:
        plan = replace(plan, watermark=intake.watermark)
    park_ceiling = max(plan.watermark, math.ceil(plan.watermark * intake.park_ceiling_factor))
    return plan, OverloadMode(intake.overload_mode), park_ceiling


class _LastLimits:
    """:func:`capacity_limits` for the last settings object seen, without hashing it (the usual
    case: one settings object per process). Resettable, like an ``lru_cache``."""

    def __init__(self) -> None:
        self._last: Tuple[Any, Any] = (None, None)  # one tuple: swapped whole, thread-safe

    def cache_clear(self) -> None:
        self._last = (None, None)

    def __call__(self, intake: IntakeSettings) -> Tuple[CapacityPlan, OverloadMode, int]:
        last, limits = self._last
        if intake is not last:
            limits = capacity_limits(intake)
            self._last = (intake, limits)
        return limits


_limits = _LastLimits()


def _drain_rate(store: Any, settings: Settings, now: float) -> Optional[float]:
    """Tasks/s finished over the drain window, or None without enough history to trust."""
    window = settings.intake.drain_window_s
    try:
        finished = store.completed_since(now - window)
    except StoreUnavailable:
        finished = 0
    return finished / window if finished >= settings.intake.drain_min_completions else None


def _unfinished(store: Any, limit: int) -> int:
    """Tasks registered and not finished, counted up to ``limit`` (the true backlog: the
    register check stops early), through the in-progress index only."""
    try:
        return store.backlog(limit)
    except StoreUnavailable:
        return 0


def _read_health(source: FlowHealthSource) -> Any:
    if source is None:
        return None
    try:
        return source() if callable(source) else source
    except Exception as exc:  # a health probe must never turn intake away
        log.warning("intake: FME Flow health check failed (%s); ignoring it", type(exc).__name__)
        return None


def _raw_bytes(body: Body) -> bytes:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8", errors="replace")
    try:
        return json.dumps(body, default=str, sort_keys=True).encode("utf-8", errors="replace")
    except (TypeError, ValueError, RecursionError):
        return repr(body).encode("utf-8", errors="replace")


def _token_of(raw: bytes, max_bytes: int) -> Optional[str]:
    """The portal token of a body that failed validation, if it can still be found."""
    if len(raw) > max_bytes or b"token" not in raw:
        return None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
        token = data["portalInfo"]["token"]
    except Exception:  # noqa: BLE001 - any failure just means "no token to scrub"
        return None
    return token if isinstance(token, str) else None


def _safe(exc: BaseException, submissions: Sequence[Submission]) -> str:
    return redact_text(str(exc), [s.portal_token for s in submissions[:1]])


__all__ = ["IntakeDecision", "decide"]
