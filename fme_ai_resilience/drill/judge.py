"""The drill's judge: one function, the same for every subject, reading only the world.

:func:`judge` turns what the stand-ins saw (:class:`Observed`, taken by
:func:`~fme_ai_resilience.drill.world.World.observe` after the run and the subject's own
recovery) into :class:`Figures`. Nothing a subject says of itself (a ledger row, a baseline's
tally) is read. A *fact* is a photo's bytes (a feature re-created with new GlobalIDs and the
same photos carries the same facts); each feature on the layer holding it is one of its
*carriers*. A fact is

* **analysed** when every carrier holds, on the layer, an outcome among :data:`ANALYSED`
  and the condition and confidence the Vision AI stand-in answers for those bytes;
* **flagged** when every carrier is analysed or flagged and one at least is flagged: the
  layer marks it :data:`FLAGGED` (awaiting analysis, manual review), or a person was told,
  with a cause, about its feature or task;
* **lost** otherwise: nobody can tell it was not analysed.

Where a carrier's assessment is read depends on the deployment (``Observed.per_photo_rows``):
on the feature's own fields (one photo per feature), or, for a feature with several photos,
on the related table's rows of that photo (a row whose ``parentglobalid`` and
``ai_photo_globalid`` name it): a row holding the answer for its bytes makes it analysed, a
row with a flag value flags it. Every subject is judged by the same rule.

A fact whose every photo is gone from the layer is *unanalysable*: counted apart, never
blamed on the subject. Costs and harms are counted at the stand-ins too: paid usable answers
beyond one per photo's bytes, a filled assessment overwritten with a different one (a
repeat with identical values changes nothing and is not counted), related-table rows added
twice (two rows naming one photo), rows written (on the layer and in the table), calls in flight at the Vision AI at once, calls into an outage and the
lag from the service's return to its first usable answer.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.intake.keys import compose_key, normalise_global_id
from ..core.ledger import LayerStatus, TaskOutcome
from ..core.config.pipeline_settings import WritebackSettings
from .standins import Message

__all__ = ["Observed", "Figures", "judge", "ANALYSED", "FLAGGED", "photo_key"]

#: The layer's outcome values that mean analysed (the write-back contract).
ANALYSED = tuple(s.value for s in LayerStatus if s.analysed)
#: The layer's outcome values that say a photo is owed, waits for a person or has a person's
#: verdict instead of the Vision AI's.
FLAGGED = tuple(s.value for s in LayerStatus if not s.analysed)
_FIELDS = WritebackSettings()
_SAME = 1e-6


def photo_key(feature_global_id: str, photo_global_id: str) -> str:
    """The task key intake gives a feature's photo (how notifications name it)."""
    return compose_key(normalise_global_id(feature_global_id, "globalId"),
                       normalise_global_id(photo_global_id, "globalId"))


@dataclass(frozen=True)
class Observed:
    """What the stand-ins saw of one subject's run.

    ``photos``: per feature GlobalID, ``(photo GlobalID, SHA-256, gone)`` for every photo the
    world gave the layer; ``history``: per feature GlobalID, every row the layer wrote as
    ``(monotonic s, values)``; ``table_rows``: per related-table row,
    ``((feature GlobalID, photo GlobalID), its writes as (monotonic s, values))``;
    ``per_photo_rows``: whether each photo's assessment is owed in its related-table row
    rather than on its feature; ``truth``: the Vision AI's answer per SHA-256; ``vision_log``:
    ``(schedule s, sha or None, outcome)`` per call; ``outages``: ``(start, end, calls)`` in
    schedule seconds; ``messages``: what people were told; ``peak_in_flight``: the most calls
    the Vision AI answered at once; ``started``: the run's start (monotonic s);
    ``time_scale``: real seconds per schedule second.
    """

    photos: Mapping[str, Sequence[Tuple[str, str, bool]]]
    history: Mapping[str, Sequence[Tuple[float, Mapping[str, Any]]]]
    truth: Mapping[str, Tuple[str, float]]
    vision_log: Sequence[Tuple[float, Optional[str], str]]
    messages: Sequence[Message] = ()
    table_rows: Mapping[Any, Tuple[Tuple[str, str], Sequence[Tuple[float, Mapping[str, Any]]]]] \
        = field(default_factory=dict)
    per_photo_rows: bool = False
    outages: Sequence[Tuple[float, float, int]] = ()
    peak_in_flight: int = 0
    started: float = 0.0
    time_scale: float = 1.0


@dataclass(frozen=True)
class Figures:
    """One subject's figures, every one counted at the stand-ins (see the module)."""

    facts: int
    unanalysable: int
    analysed: int
    accepted: int
    review: int
    flagged: int
    awaiting: int
    manual_review: int
    notified: int
    lost: int
    duplicate_analyses: int
    conflicting_writes: int
    duplicate_rows: int
    layer_edits: int
    ai_calls: int
    ai_calls_per_analysed: Optional[float]
    outage_ai_calls: int
    recovery_lag_s: Optional[float]
    peak_concurrent_calls: int
    drain_s: Optional[float]
    dead_by_cause: Mapping[str, int]

    @property
    def analysable(self) -> int:
        """The facts some subject could analyse: every fact but the unanalysable."""
        return self.facts - self.unanalysable


def _assessment(values: Mapping[str, Any]) -> Tuple[Any, Any, Any]:
    return (values.get(_FIELDS.condition_field), values.get(_FIELDS.confidence_field),
            values.get(_FIELDS.outcome_field))


def _same(a: Tuple[Any, Any, Any], b: Tuple[Any, Any, Any]) -> bool:
    if a[0] != b[0] or a[2] != b[2]:
        return False
    if isinstance(a[1], (int, float)) and isinstance(b[1], (int, float)):
        return math.isclose(float(a[1]), float(b[1]), abs_tol=_SAME)
    return a[1] == b[1]


def _fold(rows: Sequence[Tuple[float, Mapping[str, Any]]]) -> Tuple[Dict[str, Any], int]:
    """The feature's written fields at the end, and how often a filled assessment was
    overwritten with a different one."""
    now: Dict[str, Any] = {}
    conflicts = 0
    for _, values in rows:
        before = _assessment(now)
        now.update(values)
        after = _assessment(now)
        if before[2] in ANALYSED and not _same(before, after):
            conflicts += 1
    return now, conflicts


def _analysed(values: Mapping[str, Any], truth: Optional[Tuple[str, float]]) -> bool:
    condition, confidence, outcome = _assessment(values)
    return (truth is not None and outcome in ANALYSED and condition == truth[0]
            and isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
            and math.isclose(float(confidence), truth[1], abs_tol=_SAME))


def _state(values: Sequence[Mapping[str, Any]], truth: Optional[Tuple[str, float]],
           told: bool) -> str:
    """A carrier's state from the assessments that may hold it (its feature's fields, or
    each of its related-table rows): an analysed outcome, a flag value, notified or lost."""
    for v in values:
        if _analysed(v, truth):
            return str(_assessment(v)[2])
    for v in values:
        if _assessment(v)[2] in FLAGGED:
            return str(_assessment(v)[2])
    return "notified" if told else "lost"


def judge(seen: Observed) -> Figures:
    """The figures of one subject's run from what the stand-ins saw (see the module)."""
    finals: Dict[str, Dict[str, Any]] = {}
    conflicts = 0
    for gid, rows in seen.history.items():
        finals[gid], n = _fold(rows)
        conflicts += n
    by_photo: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for photo, writes in seen.table_rows.values():
        final, n = _fold(writes)
        conflicts += n
        by_photo.setdefault((photo[0].upper(), photo[1].upper()), []).append(final)
    told = {m.task_key for m in seen.messages if m.cause.strip()} | {
        m.feature_global_id for m in seen.messages if m.cause.strip()}
    told.discard(None)
    carriers: Dict[str, List[str]] = {}
    gone: Counter = Counter()
    for gid, photos in seen.photos.items():
        for photo_gid, sha, lost_photo in photos:
            if lost_photo:
                gone[sha] += 1
                continue
            held = (by_photo.get((gid.upper(), photo_gid.upper()), []) if seen.per_photo_rows
                    else [finals.get(gid, {})])
            carriers.setdefault(sha, []).append(_state(
                held, seen.truth.get(sha), gid in told or photo_key(gid, photo_gid) in told))
    facts = set(carriers) | set(gone)
    tally: Counter = Counter()
    for states in carriers.values():
        if all(s in ANALYSED for s in states):
            tally["analysed"] += 1
            tally[states[0]] += 1
        elif "lost" in states:
            tally["lost"] += 1
        else:
            tally["flagged"] += 1
            tally[next(s for s in states if s not in ANALYSED)] += 1
    usable = Counter(sha for _, sha, outcome in seen.vision_log if outcome == "ok")
    calls = len(seen.vision_log)
    analysed = tally["analysed"]
    return Figures(
        facts=len(facts), unanalysable=len(set(gone) - set(carriers)), analysed=analysed,
        accepted=tally[TaskOutcome.ACCEPTED.value], review=tally[TaskOutcome.REVIEW.value],
        flagged=tally["flagged"], awaiting=tally[FLAGGED[0]], manual_review=tally[FLAGGED[1]],
        notified=tally["notified"], lost=tally["lost"],
        duplicate_analyses=sum(n - 1 for n in usable.values() if n > 1),
        conflicting_writes=conflicts,
        duplicate_rows=sum(len(rows) - 1 for rows in by_photo.values()),
        layer_edits=sum(len(rows) for rows in seen.history.values())
        + sum(len(writes) for _, writes in seen.table_rows.values()),
        ai_calls=calls,
        ai_calls_per_analysed=round(calls / analysed, 3) if analysed else None,
        outage_ai_calls=sum(n for _, _, n in seen.outages),
        recovery_lag_s=_recovery_lag(seen), peak_concurrent_calls=seen.peak_in_flight,
        drain_s=_drain(seen), dead_by_cause=dict(Counter(
            m.cause for m in seen.messages if m.cause.strip())))


def _recovery_lag(seen: Observed) -> Optional[float]:
    """Real seconds from the last outage's end to the first usable answer after it."""
    if not seen.outages:
        return None
    end = max(e for _, e, _ in seen.outages)
    after = [t for t, _, outcome in seen.vision_log if outcome == "ok" and t >= end]
    return round((min(after) - end) * seen.time_scale, 3) if after else None


def _drain(seen: Observed) -> Optional[float]:
    """Real seconds from the run's start to the last thing the world saw settle: the last
    row written or the last message sent."""
    times = [t for rows in seen.history.values() for t, _ in rows]
    times += [t for _, writes in seen.table_rows.values() for t, _ in writes]
    times += [m.at for m in seen.messages]
    return round(max(times) - seen.started, 3) if times else None
