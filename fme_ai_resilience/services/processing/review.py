"""The review queue people work: photos skipped by the deployment's policy (never analysed)
and answers under the confidence threshold, each waiting for a person's verdict.

:func:`resolve` records a reviewer's verdict (a condition of ``validation.conditions``, who,
a note) once, then writes it back through the sink (the outcome field shows REVIEWED, the
condition field the reviewer's condition), once: a second resolve of the same photo is
refused, naming the verdict already recorded; a verdict whose write-back failed is written
again by the next resolve instead. The process writing a verdict holds its write-back
(another resolve meanwhile is refused) for longer than the write-back can take
(:func:`write_hold_s`), so it reaches the layer once.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ...core.errors import ConfigurationError, ResilienceError
from ...core.ledger import LayerStatus, ReviewItem, ReviewState, ReviewVerdict, Task
from ...core.text.redact import redact_text
from ...core.config.settings import Settings
from ...store.base import Store
from ...store.review_rows import REVIEW_WRITE_S
from .sinks import Conclusion, Sink

__all__ = ["ReviewRefused", "Resolution", "Resolved", "resolve", "write_hold_s",
           "WRITE_REQUESTS"]

#: The longest reviewer name and note kept.
MAX_REVIEWER = 200
MAX_NOTE = 2000


#: The most requests one verdict's write-back sends: a related-table row is looked up, added,
#: looked up again and updated (4 calls), each sent again once with a renewed token, and each
#: send may first fetch that token.
WRITE_REQUESTS = 4 * 2 * 2


def write_hold_s(settings: Settings) -> float:
    """How long a verdict's write-back is held, s: longer than it can take (every request it
    may send, each given ``arcgis.request_timeout_s`` at most to connect, to send, to the
    first byte of its answer and to the rest of it, plus a minute), and never under
    ``REVIEW_WRITE_S``, so a second resolve never writes a verdict while the first is still
    writing it."""
    return max(REVIEW_WRITE_S, WRITE_REQUESTS * 4 * settings.arcgis.request_timeout_s + 60.0)


class ReviewRefused(ResilienceError):
    """The photo is not in the review queue, or its verdict is recorded already."""


class Resolved(str, enum.Enum):
    """What :func:`resolve` did."""

    RECORDED = "recorded"             # the verdict recorded and written back
    WRITTEN_AGAIN = "written again"   # the verdict recorded earlier, its write-back retried


@dataclass(frozen=True)
class Resolution:
    """The verdict in force for a photo, and what this resolve did with it."""

    key: str
    verdict: ReviewVerdict
    done: Resolved


def resolve(key: str, condition: str, reviewer: str, note: str, settings: Settings,
            sink: Sink, *, store: Store, now: float, secrets: Sequence[str] = ()) -> Resolution:
    """Record the verdict of ``reviewer`` on ``key`` and write it back, each once.

    The reviewer's name and note keep no secret: neither a credential by its look nor any
    of ``settings``' secret values or ``secrets`` (the ledger URL's password, ...), in any
    encoding. The write-back is held for :func:`write_hold_s`.
    """
    if sink.name == "collect":
        raise ConfigurationError("writeback.sink", "collect", "hands conclusions to FME's own "
                                 "writers inside WS-02: a verdict needs feature_layer or table")
    item = store.review_item(key)
    if item is None:
        raise ReviewRefused(f"{key}: not in the review queue (only photos skipped by policy "
                            "or answered under the confidence threshold are)")
    if item.state is ReviewState.RESOLVED:
        assert item.verdict is not None
        if item.written_at is not None:
            v = item.verdict
            raise ReviewRefused(f"{key}: already resolved by {v.reviewer} as {v.condition!r}; "
                                "a verdict is recorded once")
        if not store.claim_review_write(key, now=now, write_s=write_hold_s(settings)):
            raise ReviewRefused(f"{key}: the verdict of {item.verdict.reviewer} is being "
                                "written back by another process; see `review show`")
        _write(item, item.verdict, sink, store=store, now=now)
        return Resolution(key, item.verdict, Resolved.WRITTEN_AGAIN)
    verdict = _verdict(condition, reviewer, note, settings, now=now,
                       secrets=(*settings.secret_values(), *secrets))
    if not store.resolve_review(key, verdict, now=now, write_s=write_hold_s(settings)):
        raise ReviewRefused(f"{key}: resolved meanwhile by someone else; see `review show`")
    _write(item, verdict, sink, store=store, now=now)
    return Resolution(key, verdict, Resolved.RECORDED)


def _verdict(condition: str, reviewer: str, note: str, settings: Settings, *,
             now: float, secrets: Sequence[str]) -> ReviewVerdict:
    conditions = settings.validation.conditions
    if condition not in conditions:
        raise ConfigurationError("condition", condition,
                                 f"must be one of validation.conditions {list(conditions)}")
    who = reviewer.strip()
    if not who or len(who) > MAX_REVIEWER or not who.isprintable():
        raise ConfigurationError("reviewer", reviewer, f"must name the reviewer (printable, "
                                 f"at most {MAX_REVIEWER} characters)")
    if len(note) > MAX_NOTE:
        raise ConfigurationError("note", note[:40] + "...", f"is over {MAX_NOTE} characters")
    # a credential pasted into a note never reaches the ledger or `review show`
    return ReviewVerdict(condition=condition, reviewer=redact_text(who, secrets),
                         resolved_at=now, note=redact_text(note, secrets))


def _write(item: ReviewItem, verdict: ReviewVerdict, sink: Sink, *, store: Store,
           now: float) -> None:
    """The verdict through the sink (REVIEWED), then remembered as written."""
    task = Task(key=item.key, lease_token=0, lease_expires_at=0.0, attempt_count=0,
                payload=item.payload, trace_id=item.trace_id, source="review",
                created_at=item.since)
    result = {"condition": verdict.condition, "confidence": None,
              "model_version": f"reviewer:{verdict.reviewer}"}
    try:
        sink.flag(Conclusion(task, None, result, layer=LayerStatus.REVIEWED), store=store,
                  now=now)
    except BaseException:
        store.release_review_write(item.key)
        raise
    store.review_written(item.key, now=now)
