"""The intake: a webhook body in, the ledger updated, an HTTP answer out.

:func:`receive` implements the status contract (docs/intake.md):

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
422     ``intake.feature_services`` is set and the body names another feature service (or
        none): nothing is registered (no task, so no download); a DEAD row (UNKNOWN_SERVICE)
        keyed by the body's SHA-256, never by the photos' keys, which a forged body would
        otherwise take from the real submission, keeps the evidence. Not retryable.
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

import json
import logging
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ...core.intake.capacity import CapacityPlan
from ...core.resilience.degrade import priority_of
from ...core.checks import count
from ...core.errors import (SCHEMA_MISSING, FailureClass, InvalidPayload, SchemaMissing,
                            StoreError, StoreUnavailable)
from ...core.intake.keys import body_key, trace_id_for
from ...core.ledger import (DELIVERED, InvalidBodyKept, OverloadMode, Refusal, RegisterOutcome,
                            Registration)
from ...core.text.printable import printable
from ...core.text.redact import excerpt, redact_raw, redact_text, redact_url, token_values
from ...core.config.settings import Settings
from ...core.resilience.degrade import DegradeSettings
from ...store.base import Store
from ...core.intake.submission import Submission
from ...core.intake.arcgis_webhook import parse_notifications
from ...core.intake.senders import Delivery, Unsupported, read_delivery
from ...core.intake.survey123 import delivery_id_of, parse_webhook
from .arcgis_webhook import register_notifications
from ...core.text.untrusted_json import Body, body_bytes

__all__ = ["IntakeAnswer", "receive", "decide", "ledger_retry_after_s", "EXCERPT_CHARS",
           "MAX_LISTED"]

log = logging.getLogger("fme_ai_resilience.intake")

EXCERPT_CHARS = 2048
#: How many registrations a 202/429/503 answer lists by key (the rest are only counted).
MAX_LISTED = 50

_NEW = (RegisterOutcome.NEW, RegisterOutcome.PARKED)


@dataclass(frozen=True)
class IntakeAnswer:
    """The HTTP answer to one webhook delivery: status code, headers and a JSON body.

    ``registrations`` holds what the ledger answered for each photo, in body order.
    """

    status_code: int
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    registrations: Sequence[Registration] = ()

    def __post_init__(self) -> None:
        count("status_code", self.status_code, minimum=100, maximum=599)
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


FlowHealthSource = Union[None, Any, Callable[[], Any]]


def receive(body: Body, headers: Optional[Mapping[str, Any]] = None,
           settings: Optional[Settings] = None, *, store: Store, now: float,
           flow_health: FlowHealthSource = None,
           received_at: Optional[float] = None) -> IntakeAnswer:
    """Parse, register and answer one webhook delivery (see the module docstring's table).

    ``store`` is a :class:`~fme_ai_resilience.store.Store`; ``now`` the epoch seconds of the
    injected clock; ``flow_health`` a ``FlowHealth`` (or a callable returning one, such as
    ``FlowClient.health``) or None to skip the engine check; ``received_at`` when the delivery
    arrived (epoch seconds, ``now`` by default), recorded with each registration: the intake
    latency is from there to the registration. Raises only what the store raises beyond
    :class:`StoreUnavailable` (a 503).
    """
    settings = settings or Settings()
    intake = settings.intake
    arrived = now if received_at is None else received_at
    try:
        delivery = body if isinstance(body, Delivery) else read_delivery(
            body, headers, max_bytes=intake.max_body_bytes, max_depth=intake.max_depth)
    except Unsupported as exc:
        log.warning("intake: a delivery in a format not read: %s", exc)
        return IntakeAnswer(415, {}, {"status": "unsupported_media_type", "reason": str(exc)})
    except InvalidPayload as exc:   # a CloudEvent without a required attribute
        return _invalid(body_bytes(body), headers, exc, settings, store=store, now=now)
    if delivery.sender.is_arcgis:
        return _notifications(delivery, headers, settings, store=store, now=now,
                              received_at=arrived, flow_health=flow_health)
    body, headers = delivery.body, delivery.headers_for_parser(headers)
    try:
        submissions = parse_webhook(body, headers, max_bytes=intake.max_body_bytes,
                                    max_depth=intake.max_depth,
                                    max_attachments=intake.max_attachments)
    except InvalidPayload as exc:
        return _invalid(body, headers, exc, settings, store=store, now=now)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the body as a 500
        log.error("intake: the parser failed on a body with %s; recording it as invalid",
                  type(exc).__name__)
        unreadable = InvalidPayload(f"the body could not be parsed ({type(exc).__name__})")
        return _invalid(body, headers, unreadable, settings, store=store, now=now)
    if intake.feature_services:
        foreign = next((s for s in submissions if not intake.serves(s.service_url)), None)
        if foreign is not None:
            return _unknown_service(body, headers, submissions, foreign, settings,
                                    store=store, now=now)

    plan, mode, park_ceiling = intake.capacity, intake.overload_mode, intake.park_ceiling
    health = None if flow_health is None else _read_health(flow_health)
    no_capacity = health is not None and not health.has_capacity
    ceiling = 0 if no_capacity else plan.watermark
    registrations: List[Registration] = []
    try:
        _register_whole(submissions, ceiling, mode, park_ceiling,
                        intake.hard_ceiling, registrations,
                        settings.degrade, store=store, now=now, received_at=arrived)
    except StoreUnavailable as exc:
        stored = [r.key for r in registrations if r.outcome is not RegisterOutcome.OVER_BACKLOG]
        # Nothing can be recorded: the log line is what reconciliation has to go on.
        log.error("intake: ledger unreachable after %d of %d photo(s) of %s: %s", len(stored),
                  len(submissions), _where(submissions[0]), _safe(exc, submissions))
        return _unavailable(settings, _why_unavailable(exc), stored, registrations)
    answer = _answer(submissions, registrations, settings, plan, health, no_capacity,
                     store=store, now=now)
    if any(r.outcome is RegisterOutcome.OVER_BACKLOG for r in registrations):
        _record_refusal(body, submissions, answer, settings, store=store, now=now)
    return answer



#: The earlier name of :func:`receive`, kept for code written against it.
decide = receive


def _notifications(delivery: Delivery, headers: Optional[Mapping[str, Any]], settings: Settings,
                   *, store: Store, now: float, received_at: float,
                   flow_health: FlowHealthSource) -> IntakeAnswer:
    """An ArcGIS layer webhook's delivery: every notification kept, answered 2xx whenever the
    ledger answers (an invalid or foreign one as a dead letter, 200), 503 only while it does
    not: ArcGIS deactivates a webhook after failed deliveries."""
    try:
        notifications, problems = parse_notifications(delivery.data)
    except InvalidPayload as exc:
        return _accepted_anyway(_invalid(delivery.raw, headers, exc, settings, store=store,
                                         now=now))
    if problems:   # the items that could not be read: the body kept as evidence, once
        kept = _invalid(delivery.raw, headers, InvalidPayload(
            f"{len(problems)} of the delivery's notifications could not be read: "
            + "; ".join(str(p) for p in problems[:5])), settings, store=store, now=now)
        if not notifications or kept.status_code >= 500:
            return _accepted_anyway(kept)
    intake = settings.intake
    if intake.feature_services:
        foreign = next((n for n in notifications if not intake.serves(n.service_url)), None)
        if foreign is not None:
            subs = [n.submission(delivery.delivery_id) for n in notifications]
            return _accepted_anyway(_unknown_service(
                delivery.raw, headers, subs, foreign.submission(delivery.delivery_id),
                settings, store=store, now=now))
    wanted = [n for n in notifications if n.brings_photos]
    health = None if flow_health is None else _read_health(flow_health)
    try:
        registrations = register_notifications(
            wanted, settings, store=store, now=now, received_at=received_at,
            no_capacity=health is not None and not health.has_capacity,
            delivery_id=delivery.delivery_id)
    except StoreUnavailable as exc:
        log.error("intake: ledger unreachable for a %s notification of %s: %s",
                  delivery.sender.value, redact_url(notifications[0].service_url), exc)
        return _unavailable(settings, _why_unavailable(exc), [], [])
    try:   # the sender's health: counted, never a reason to refuse what is stored
        store.record_sender(delivery.sender.value, DELIVERED, now=now)
    except StoreError as exc:
        log.warning("intake: a %s delivery could not be counted: %s", delivery.sender.value,
                    type(exc).__name__)
    if not wanted:
        events = sorted({e for n in notifications for e in n.events})
        log.info("intake: %s notification(s) of %s with no photo to bring (%s): not kept",
                 delivery.sender.value, redact_url(notifications[0].service_url),
                 ", ".join(events))
        return IntakeAnswer(200, {}, {"status": "ignored", "events": events,
                                      "sender": delivery.sender.value})
    outcomes = [r.outcome for r in registrations]
    left_out = [n for n, o in zip(wanted, outcomes) if o is RegisterOutcome.OVER_BACKLOG]
    if left_out:
        _record_left_out(delivery, left_out, settings, store=store, now=now)
    if any(o in _NEW for o in outcomes):
        state = "accepted"
    elif all(o is RegisterOutcome.DUPLICATE_DONE for o in outcomes):
        state = "duplicate_done"
    else:
        state = "duplicate_in_progress"
    log.info("intake: %s %s notification(s) of %s: %s", state, delivery.sender.value,
             redact_url(wanted[0].service_url),
             ", ".join(f"{r.key} {r.outcome.value}" for r in registrations[:MAX_LISTED]))
    body = {"status": state, "sender": delivery.sender.value, "stored": not left_out,
            "submissions": _listing(registrations), "submission_count": len(registrations)}
    if problems:
        body.update(unread=len(problems), dead_letter=kept.body.get("dead_letter"))
    return IntakeAnswer(200 if state == "duplicate_done" else 202, {}, body, registrations)


def _accepted_anyway(answer: IntakeAnswer) -> IntakeAnswer:
    """A refusal an ArcGIS sender would count toward deactivating its webhook, answered 200
    when its evidence is in the ledger (the answer's body still says what it was)."""
    if answer.status_code >= 500:
        return answer
    return IntakeAnswer(200, answer.headers, dict(answer.body, refused=answer.status_code),
                        answer.registrations)


def _record_left_out(delivery: Delivery, left_out: Sequence[Any], settings: Settings, *,
                     store: Store, now: float) -> None:
    """Past the hard ceiling: a refusal record per notification left out, for reconciliation
    (the answer is still 202: the sender would deactivate the webhook otherwise)."""
    for notification in left_out:
        refusal = Refusal(key=notification.key, reason="over_backlog", status_code=202,
                          feature_global_id=notification.key, refused_at=now,
                          photos_refused=1, photos_stored=0,
                          service_url=notification.service_url,
                          layer_url=notification.submission().layer_url,
                          delivery_id=delivery.delivery_id, event_type="layerChanges")
        try:
            if not store.record_refusal(refusal, limit=settings.intake.max_refusal_records):
                log.error("intake: notification %s left out past the hard ceiling and not "
                          "recorded: reconcile the layer from this line", notification.key)
        except StoreError as exc:
            log.error("intake: notification %s left out past the hard ceiling; its record "
                      "failed (%s): reconcile the layer from this line", notification.key,
                      type(exc).__name__)

def _register_whole(submissions: Sequence[Submission], ceiling: int, mode: OverloadMode,
                    park_ceiling: int, hard_ceiling: int, out: List[Registration],
                    degrade: DegradeSettings, *, store: Store, now: float,
                    received_at: float) -> None:
    """Register every photo (a critical asset type's with the claim priority that puts it
    first); if the body is partly in the ledger, store the refused rest parked, up to
    ``hard_ceiling`` unfinished tasks."""
    priority = [priority_of(degrade, sub.asset_type) for sub in submissions]
    for sub, first in zip(submissions, priority):
        out.append(store.register(sub, ceiling, mode, park_ceiling, now=now, priority=first,
                                  received_at=received_at))
    refused = [i for i, r in enumerate(out) if r.outcome is RegisterOutcome.OVER_BACKLOG]
    if not refused or len(refused) == len(out):
        return
    for i in refused:
        out[i] = store.register(submissions[i], 0, OverloadMode.PARK, hard_ceiling, now=now,
                                priority=priority[i], received_at=received_at)
    left = sum(1 for i in refused if out[i].outcome is RegisterOutcome.OVER_BACKLOG)
    log.warning("intake: %d photo(s) of %s over the ceiling parked with the rest of their "
                "submission%s", len(refused) - left, submissions[0].feature_global_id,
                f"; {left} refused past the hard ceiling of {hard_ceiling}" if left else "")


def _listing(registrations: Sequence[Registration]) -> List[Dict[str, Any]]:
    return [{"key": r.key, "outcome": r.outcome.value,
             "status": None if r.status is None else r.status.value}
            for r in registrations[:MAX_LISTED]]


def _answer(submissions: Sequence[Submission], registrations: Sequence[Registration],
            settings: Settings, plan: CapacityPlan, health: Any, no_capacity: bool, *,
            store: Store, now: float) -> IntakeAnswer:
    outcomes = [r.outcome for r in registrations]
    over = RegisterOutcome.OVER_BACKLOG in outcomes
    new = any(o in _NEW for o in outcomes)
    first = submissions[0]
    context = {"feature": first.feature_global_id, "delivery_id": first.delivery_id,
               "submissions": _listing(registrations), "submission_count": len(registrations)}
    if over or (no_capacity and new):
        rate = _drain_rate(settings, store=store, now=now)
        if no_capacity:
            backlog = plan.watermark + max(1, int(getattr(health, "queued", 0) or 0))
            status, state = 503, "no_engine_capacity"
        else:
            backlog = max([r.backlog for r in registrations]
                          + [_unfinished(plan.saturating_backlog(rate), store=store)])
            status, state = 429, "over_backlog"
        retry_after = plan.retry_after_s(backlog, rate)
        stored = any(o is not RegisterOutcome.OVER_BACKLOG for o in outcomes)
        log.warning("intake: %s for %s (trace %s): %d photo(s), %s, Retry-After %ds", state,
                    _where(first), first.trace_id, len(outcomes),
                    "some stored" if stored else "nothing stored", retry_after)
        return IntakeAnswer(status, {"Retry-After": str(retry_after)},
                            dict(context, status=state, stored=stored,
                                 retry_after_s=retry_after), registrations)
    if new:
        status, state = 202, "accepted"
    elif all(o is RegisterOutcome.DUPLICATE_DONE for o in outcomes):
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
    return IntakeAnswer(status, {}, dict(context, status=state, stored=True), registrations)


def _where(first: Submission) -> str:
    """A submission as reconciliation finds it: feature, delivery, layer and service."""
    layer, service = redact_url(first.layer_url or "-"), redact_url(first.service_url or "-")
    return (f"feature {first.feature_global_id} (delivery {first.delivery_id}, layer "
            f"{layer}, service {service})")


def _record_refusal(body: Body, submissions: Sequence[Submission], answer: IntakeAnswer,
                    settings: Settings, *, store: Store, now: float) -> None:
    """Leave what reconciliation needs of a delivery whose photos were not all stored (a
    refusal record, bounded); a record that cannot be written is logged in full instead."""
    refused = [s for s, r in zip(submissions, answer.registrations)
               if r.outcome is RegisterOutcome.OVER_BACKLOG]
    first = submissions[0]
    refusal = Refusal(
        key=body_key(body_bytes(body)), reason=str(answer.body["status"]),
        status_code=answer.status_code, feature_global_id=first.feature_global_id,
        refused_at=now, photos_refused=len(refused),
        photos_stored=len(submissions) - len(refused), service_url=first.service_url,
        layer_url=first.layer_url, delivery_id=first.delivery_id, event_type=first.event_type,
        records=tuple(dict.fromkeys((s.layer_url, s.feature_global_id) for s in refused)))
    try:
        if store.record_refusal(refusal, limit=settings.intake.max_refusal_records):
            return
        log.error("intake: refusal of %s not recorded (past %d refusal records): reconcile "
                  "from this line: %s", refusal.key, settings.intake.max_refusal_records,
                  _refusal_text(refusal))
    except StoreError as exc:
        log.error("intake: refusal of %s could not be recorded (%s): reconcile from this "
                  "line: %s", refusal.key, _safe(exc, submissions), _refusal_text(refusal))


def _refusal_text(refusal: Refusal) -> str:
    return (f"{refusal.reason} {refusal.status_code} at {refusal.refused_at:.3f}, feature "
            f"{refusal.feature_global_id}, delivery {refusal.delivery_id}, layer "
            f"{redact_url(refusal.layer_url or '-')}, service "
            f"{redact_url(refusal.service_url or '-')}, records "
            f"{[gid for _, gid in refusal.records]}, {refusal.photos_refused} photo(s) refused")


def _invalid(body: Body, headers: Optional[Mapping[str, Any]], exc: InvalidPayload,
             settings: Settings, *, store: Store, now: float) -> IntakeAnswer:
    """400, with the evidence kept as a dead letter keyed by the body's hash."""
    raw = body_bytes(body)
    # The token of a body that did not parse cannot be read from it: learn every value it
    # reveals from the whole body, then scrub the excerpt by those values and by pattern.
    secrets = token_values(raw[:settings.intake.max_body_bytes].decode("utf-8", "replace"))
    reason = printable(redact_text(str(exc), secrets))  # it names body keys, as sent
    key = body_key(raw)
    delivery = delivery_id_of(headers)
    window = raw[:EXCERPT_CHARS * 4].decode("utf-8", "replace")
    payload = {"reason": reason, "bytes": len(raw), "delivery_id": delivery,
               "excerpt": excerpt(redact_raw(window, secrets),
                                  EXCERPT_CHARS).replace("\x00", "\ufffd")}
    intake = settings.intake
    try:
        kept = store.keep_invalid_body(key, payload, reason, now=now,
                                       per_minute=intake.max_invalid_per_minute,
                                       limit=intake.max_invalid_total, trace_id=trace_id_for(key))
    except StoreUnavailable as err:
        log.error("intake: invalid body %s (%s) and the ledger is unreachable: %s", key,
                  reason, redact_text(str(err), secrets))
        return _unavailable(settings, _why_unavailable(err), [], [])
    if kept is InvalidBodyKept.NOT_KEPT:
        log.warning("intake: invalid body %s (delivery %s) not kept, only counted: past %d "
                    "dead letters of invalid bodies a minute or %d in all: %s", key, delivery,
                    intake.max_invalid_per_minute, intake.max_invalid_total, reason)
    else:
        log.warning("intake: invalid body %s (delivery %s): %s%s", key, delivery, reason,
                    "" if kept is InvalidBodyKept.KEPT else " (already recorded)")
    held = kept is not InvalidBodyKept.NOT_KEPT
    return IntakeAnswer(400, {}, {"status": "invalid", "reason": reason,
                                  "dead_letter": key if held else None, "kept": held,
                                  "delivery_id": delivery})


def _why_unavailable(exc: StoreUnavailable) -> str:
    """The reason a 503 gives: what an operator must do about a ledger without tables."""
    return SCHEMA_MISSING if isinstance(exc, SchemaMissing) else "ledger unreachable"


def ledger_retry_after_s(settings: Settings) -> int:
    """The Retry-After of a 503 while the ledger cannot answer: there is no backlog to
    measure, so one mean processing time (whole seconds, at least 1)."""
    return max(1, math.ceil(settings.intake.mean_processing_s))


def _unknown_service(body: Body, headers: Optional[Mapping[str, Any]],
                     submissions: Sequence[Submission], foreign: Submission,
                     settings: Settings, *, store: Store, now: float) -> IntakeAnswer:
    """422 for a body naming a feature service the deployment does not serve: no task (so
    no download); the evidence is a dead letter keyed by the body's hash, never by the
    photos' keys, which a forged body would otherwise take from the real submission."""
    raw, secrets = body_bytes(body), [foreign.portal_token]
    key = body_key(raw)
    named = redact_text(foreign.service_url or "(none)", secrets)
    evidence = {"reason": f"the body names the feature service {named}, which this deployment "
                          "does not serve (intake.feature_services)",
                "service_url": named if foreign.service_url else None,
                "keys": [s.idempotency_key for s in submissions[:MAX_LISTED]],
                "submission_count": len(submissions), "bytes": len(raw),
                "delivery_id": delivery_id_of(headers),
                "excerpt": excerpt(raw, EXCERPT_CHARS, secrets).replace("\x00", "\ufffd")}
    try:
        fresh = store.record_dead_letter(key, evidence, FailureClass.UNKNOWN_SERVICE,
                                         evidence["reason"], now=now, trace_id=trace_id_for(key))
    except StoreUnavailable as err:
        log.error("intake: body %s names an unknown service and the ledger is unreachable", key)
        return _unavailable(settings, _why_unavailable(err), [], [])
    log.warning("intake: body %s (delivery %s) names %s, not a service of this deployment: "
                "not registered%s", key, evidence["delivery_id"], named,
                "" if fresh else " (already recorded)")
    return IntakeAnswer(422, {}, {"status": "unknown_service", "reason": evidence["reason"],
                                  "dead_letter": key, "delivery_id": evidence["delivery_id"]})


def _unavailable(settings: Settings, reason: str, stored: Sequence[str],
                 registrations: Sequence[Registration]) -> IntakeAnswer:
    """503 while the ledger is down: no backlog to measure, so one mean processing time."""
    retry_after = ledger_retry_after_s(settings)
    return IntakeAnswer(503, {"Retry-After": str(retry_after)},
                        {"status": "unavailable", "reason": reason, "stored": list(stored),
                         "retry_after_s": retry_after}, registrations)


def _drain_rate(settings: Settings, *, store: Store, now: float) -> Optional[float]:
    """Tasks/s finished over the drain window, or None without enough history to trust."""
    window = settings.intake.drain_window_s
    try:
        finished = store.completed_since(now - window)
    except StoreUnavailable:
        finished = 0
    return finished / window if finished >= settings.intake.drain_min_completions else None


def _unfinished(limit: int, *, store: Store) -> int:
    """Tasks registered and not finished, counted up to ``limit`` (the true backlog: the
    register check stops early), through the in-progress index only."""
    try:
        return store.backlog(limit)
    except StoreUnavailable:
        return 0


def _read_health(source: FlowHealthSource) -> Any:
    try:
        return source() if callable(source) else source
    except Exception as exc:  # a health probe must never turn intake away
        log.warning("intake: FME Flow health check failed (%s); ignoring it", type(exc).__name__)
        return None


def _safe(exc: BaseException, submissions: Sequence[Submission]) -> str:
    return redact_text(str(exc), [s.portal_token for s in submissions[:1]])
