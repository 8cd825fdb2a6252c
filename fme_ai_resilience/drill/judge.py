"""The drill's judge: one function, the same for every subject, reading only the world.

:func:`judge` turns what the stand-ins saw (:class:`Observed`, taken by
:func:`~fme_ai_resilience.drill.world.World.observe` after the run) into :class:`Figures`.
Nothing a subject says of itself (a ledger row, a baseline's tally) is read. A *fact* is a
photo's bytes (a feature re-created with new GlobalIDs and the same photos carries the same
facts); each feature on the layer holding it is one of its *carriers*. A fact is

* **analysed** when every carrier holds, on the layer, an outcome among :data:`ANALYSED` and
  the condition and confidence of a usable answer the Vision AI stand-in gave for those
  bytes (an answer in schema: never one it did not give, one out of schema or one cut
  short), or :data:`REVIEWED` with the verdict a reviewer gave for that photo from the review
  queue (``Observed.verdicts``);
* **flagged** when every carrier is analysed or flagged and one at least is flagged: the
  layer marks it :data:`FLAGGED` (awaiting analysis, manual review), or a person was told,
  with a cause, about its feature or task;
* **lost** otherwise: nobody can tell it was not analysed.

Where a carrier's assessment is read depends on the deployment (``Observed.per_photo_rows``):
on the feature's own fields (one photo per feature), or, for a feature with several photos,
on the related table's rows of that photo (a row whose ``parentglobalid`` and
``ai_photo_globalid`` name it): a row holding an answer for its bytes makes it analysed, a
row with a flag value flags it. Every subject is judged by the same rule.

The layer's writes are replayed in time order (:func:`replay`), so each fact's state is
known at every moment: the page's photo chart is drawn from it, its last state is the
figure, and the time a fact became analysed gives its time to result.

A fact whose every photo is gone from the layer is *unanalysable*: counted apart, never
blamed on the subject. Costs and harms are counted at the stand-ins too: paid usable answers
beyond one per photo's bytes (an answer paid again is counted apart, as *cut by a kill*, only
when an engine died with an earlier one in flight or in hand: the Vision AI saw a client
close the connection the answer was waiting on, or had gone out whole on, within
:data:`KILL_GRACE_S` after an engine's death (a killed process closes every socket it held;
a living one keeps its connections for its next calls), and the layer did not show the photo
by the death. An answer whose client kept its connection, or closed it with no death near,
is counted against the subject, and so is every call a living client gave up on), a filled
assessment overwritten with a different one (a repeat with identical values changes nothing
and is not counted, nor is a reviewer's verdict over the answer it reviews), related-table
rows added twice (two rows naming one photo), rows written (on the layer and in the table),
calls in flight at the Vision AI at once, calls into an outage and the lag from the service's
return to its first usable answer; and the drain: the start to the moment the last photo
reached the state it ends in.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..core.intake.keys import compose_key, normalise_global_id
from ..core.ledger import LayerStatus, TaskOutcome
from ..core.config.pipeline_settings import WritebackSettings
from .standins import Message

__all__ = ["Observed", "Figures", "judge", "replay", "Replay", "ANALYSED", "FLAGGED",
           "REVIEWED", "NOTIFIED", "LOST", "KILL_GRACE_S", "photo_key"]

#: The layer's outcome values that mean analysed by the Vision AI (the write-back contract).
ANALYSED = tuple(s.value for s in LayerStatus if s.analysed)
#: A person's verdict from the review queue: analysed only with a verdict a reviewer gave.
REVIEWED = LayerStatus.REVIEWED.value
#: The layer's outcome values that say a photo is owed or waits for a person.
FLAGGED = (LayerStatus.AWAITING_ANALYSIS.value, LayerStatus.MANUAL_REVIEW.value)
#: A carrier's state when a person was told its cause, and when nothing says anything.
NOTIFIED, LOST = "notified", "lost"
_DONE = ANALYSED + (REVIEWED,)
_FIELDS = WritebackSettings()
_SAME = 1e-6
#: How soon after an engine's death (real s) the Vision AI sees its calls' connections close:
#: the kernel closes them at once; this leaves room for a busy machine's scheduling.
KILL_GRACE_S = 0.5

Values = Mapping[str, Any]
Answer = Tuple[str, float]


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
    rather than on its feature; ``answers``: per SHA-256, the ``(condition, confidence)`` of
    the usable answer the Vision AI gave for those bytes (none: it never gave one);
    ``verdicts``: per task key (:func:`photo_key`), the condition a reviewer gave from the
    review queue; ``vision_log``: ``(schedule s, sha or None, outcome)`` per call;
    ``outages``: ``(start, end, calls)`` in schedule seconds; ``messages``: what people were
    told; ``peak_in_flight``: the most calls the Vision AI answered at once; ``left`` and
    ``closed``: ``(monotonic s, sha, outcome)`` per answer whose client closed its connection
    before it was sent, and per answer sent whole on a connection its client closed
    afterwards (at the close); ``deaths``: when an engine died (monotonic
    s; a chaos kill); ``started``: the run's start (monotonic s); ``submitted``: per SHA-256,
    when the photo was first sent (monotonic s; default the start); ``time_scale``: real
    seconds per schedule second.
    """

    photos: Mapping[str, Sequence[Tuple[str, str, bool]]]
    history: Mapping[str, Sequence[Tuple[float, Values]]]
    answers: Mapping[str, Answer]
    vision_log: Sequence[Tuple[float, Optional[str], str]]
    messages: Sequence[Message] = ()
    table_rows: Mapping[Any, Tuple[Tuple[str, str], Sequence[Tuple[float, Values]]]] \
        = field(default_factory=dict)
    per_photo_rows: bool = False
    verdicts: Mapping[str, str] = field(default_factory=dict)
    outages: Sequence[Tuple[float, float, int]] = ()
    peak_in_flight: int = 0
    left: Sequence[Tuple[float, str, str]] = ()
    closed: Sequence[Tuple[float, str, str]] = ()
    deaths: Sequence[float] = ()
    started: float = 0.0
    submitted: Mapping[str, float] = field(default_factory=dict)
    time_scale: float = 1.0


@dataclass(frozen=True)
class Figures:
    """One subject's figures, every one counted at the stand-ins (see the module)."""

    facts: int
    unanalysable: int
    analysed: int
    accepted: int
    review: int
    reviewed: int
    flagged: int
    awaiting: int
    manual_review: int
    notified: int
    lost: int
    duplicate_analyses: int
    cut_by_kills: int
    conflicting_writes: int
    duplicate_rows: int
    layer_edits: int
    ai_calls: int
    ai_calls_per_analysed: Optional[float]
    outage_ai_calls: int
    recovery_lag_s: Optional[float]
    peak_concurrent_calls: int
    drain_s: Optional[float]
    time_to_result_p50_s: Optional[float]
    time_to_result_p95_s: Optional[float]
    dead_by_cause: Mapping[str, int]

    @property
    def analysable(self) -> int:
        """The facts some subject could analyse: every fact but the unanalysable."""
        return self.facts - self.unanalysable


def _assessment(values: Values) -> Tuple[Any, Any, Any]:
    return (values.get(_FIELDS.condition_field), values.get(_FIELDS.confidence_field),
            values.get(_FIELDS.outcome_field))


def _same(a: Tuple[Any, Any, Any], b: Tuple[Any, Any, Any]) -> bool:
    if a[0] != b[0] or a[2] != b[2]:
        return False
    if isinstance(a[1], (int, float)) and isinstance(b[1], (int, float)):
        return math.isclose(float(a[1]), float(b[1]), abs_tol=_SAME)
    return a[1] == b[1]


def _is_answer(values: Values, answer: Optional[Answer]) -> bool:
    """The values hold an analysed outcome with the condition and confidence of ``answer``."""
    condition, confidence, outcome = _assessment(values)
    return (answer is not None and outcome in ANALYSED and condition == answer[0]
            and isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
            and math.isclose(float(confidence), answer[1], abs_tol=_SAME))


def _is_verdict(values: Values, verdict: Optional[str]) -> bool:
    condition, _, outcome = _assessment(values)
    return verdict is not None and outcome == REVIEWED and condition == verdict


def _carrier_state(held: Sequence[Values], answer: Optional[Answer], verdict: Optional[str],
                   told: bool) -> str:
    """A carrier's state from the assessments that may hold it (its feature's fields, or
    each of its related-table rows): analysed (its outcome), a flag value, notified or lost."""
    for v in held:
        if _is_answer(v, answer) or _is_verdict(v, verdict):
            return str(_assessment(v)[2])
    for v in held:
        if _assessment(v)[2] in FLAGGED:
            return str(_assessment(v)[2])
    return NOTIFIED if told else LOST


def _fact_state(states: Sequence[str]) -> str:
    """A fact's state from its carriers': analysed (the first carrier's outcome) when every
    carrier is, lost when one is, else flagged (the first carrier's flag)."""
    if all(s in _DONE for s in states):
        return states[0]
    if LOST in states:
        return LOST
    return next(s for s in states if s not in _DONE)


class _Folded:
    """One feature's or row's written fields so far, and the conflicting writes among them."""

    def __init__(self) -> None:
        self.now: Dict[str, Any] = {}
        self.conflicts = 0

    def write(self, values: Values, verdict: Optional[str]) -> None:
        before = _assessment(self.now)
        self.now.update(values)
        after = _assessment(self.now)
        if (before[2] in _DONE and not _same(before, after)
                and not _is_verdict(self.now, verdict)):
            self.conflicts += 1


@dataclass
class Replay:
    """The layer's writes replayed in time order: each fact's state now, when each fact
    reached it (monotonic s), and the counts at every moment asked for."""

    states: Dict[str, str]                       # SHA-256 -> state at the end
    since: Dict[str, float]                      # SHA-256 -> when it reached that state
    gone: Set[str]                               # facts whose every photo is gone
    conflicts: int
    series: Dict[str, List[int]]                 # state -> facts in it at each time asked


def replay(seen: Observed, at: Sequence[float] = ()) -> Replay:
    """Replay ``seen``'s writes and messages in time order (see the module); ``at``: the
    monotonic times (ascending) at which to count the facts in each state."""
    carriers: Dict[str, List[Tuple[str, str]]] = {}     # sha -> [(feature, photo)]
    by_feature: Dict[str, List[Tuple[str, str, str]]] = {}
    gone_photos: Counter = Counter()
    for gid, photos in seen.photos.items():
        for photo_gid, sha, lost_photo in photos:
            if lost_photo:
                gone_photos[sha] += 1
                continue
            carriers.setdefault(sha, []).append((gid.upper(), photo_gid.upper()))
            by_feature.setdefault(gid.upper(), []).append((gid, photo_gid, sha))
    keys = {c: photo_key(*c) for cs in carriers.values() for c in cs}
    verdict = {c: seen.verdicts.get(k) for c, k in keys.items()}
    events: List[Tuple[float, int, str, Any, Values]] = []
    for gid, rows in seen.history.items():
        events += [(t, 0, "feature", gid.upper(), v) for t, v in rows]
    rows_of: Dict[Tuple[str, str], List[Any]] = {}
    for row, (photo, writes) in seen.table_rows.items():
        named = (photo[0].upper(), photo[1].upper())
        rows_of.setdefault(named, []).append(row)
        events += [(t, 0, "row", row, v) for t, v in writes]
    for m in seen.messages:
        if m.cause.strip():
            events.append((m.at, 1, "told", m, {}))
    events.sort(key=lambda e: (e[0], e[1]))

    features: Dict[str, _Folded] = {}
    rows: Dict[Any, _Folded] = {}
    told: Set[str] = set()                      # features (upper case) and task keys told
    row_carrier = {row: c for c, rs in rows_of.items() for row in rs}
    fact_of = {c: sha for sha, cs in carriers.items() for c in cs}

    def carrier_state(c: Tuple[str, str]) -> str:
        if seen.per_photo_rows:
            held = [rows[r].now for r in rows_of.get(c, ()) if r in rows]
        else:
            held = [features[c[0]].now] if c[0] in features else []
        sha = fact_of[c]
        return _carrier_state(held, seen.answers.get(sha), verdict[c],
                              c[0] in told or keys[c] in told)

    def fact_state(sha: str) -> str:
        return _fact_state([carrier_state(c) for c in carriers[sha]])

    states = {sha: fact_state(sha) for sha in carriers}
    since = {sha: seen.started for sha in carriers}
    counts: Counter = Counter(states.values())
    series: Dict[str, List[int]] = {}
    steps = list(at)
    step = 0

    def sample_until(t: float) -> None:
        nonlocal step
        while step < len(steps) and steps[step] < t:
            for name in set(series) | set(counts):
                series.setdefault(name, [0] * step).append(counts.get(name, 0))
            step += 1

    for t, _, kind, ref, values in events:
        sample_until(t)
        if kind == "feature":
            folded = features.setdefault(ref, _Folded())
            own = next(iter(by_feature.get(ref, ())), None)
            folded.write(values, verdict.get((ref, own[1].upper())) if own else None)
            touched = {sha for _, _, sha in by_feature.get(ref, ())}
        elif kind == "row":
            c = row_carrier[ref]
            rows.setdefault(ref, _Folded()).write(values, verdict.get(c))
            touched = {fact_of[c]} if c in fact_of else set()
        else:
            told.update(x for x in (ref.task_key, (ref.feature_global_id or "").upper()) if x)
            touched = set(carriers)
        for sha in touched:
            new = fact_state(sha)
            if new != states[sha]:
                counts[states[sha]] -= 1
                counts[new] += 1
                states[sha], since[sha] = new, t
    sample_until(math.inf)
    conflicts = (sum(f.conflicts for f in features.values())
                 + sum(r.conflicts for r in rows.values()))
    return Replay(states, since, set(gone_photos) - set(carriers), conflicts, series)


def judge(seen: Observed) -> Figures:
    """The figures of one subject's run from what the stand-ins saw (see the module)."""
    done = replay(seen)
    tally: Counter = Counter()
    waited: List[float] = []
    for sha, state in done.states.items():
        tally[state] += 1
        if state in _DONE:
            tally["analysed"] += 1
            waited.append(done.since[sha] - seen.submitted.get(sha, seen.started))
        elif state != LOST:
            tally["flagged"] += 1
    usable = Counter(sha for _, sha, outcome in seen.vision_log if outcome == "ok")
    again = {sha: n - 1 for sha, n in usable.items() if n > 1}
    cut = _cut_by_kills(seen, done)
    excused = {sha: min(n, cut[sha]) for sha, n in again.items()}
    calls = len(seen.vision_log)
    analysed = tally["analysed"]
    rows_per_photo = Counter((p[0].upper(), p[1].upper()) for p, _ in seen.table_rows.values())
    return Figures(
        facts=len(done.states) + len(done.gone), unanalysable=len(done.gone),
        analysed=analysed, accepted=tally[TaskOutcome.ACCEPTED.value],
        review=tally[TaskOutcome.REVIEW.value], reviewed=tally[REVIEWED],
        flagged=tally["flagged"], awaiting=tally[FLAGGED[0]], manual_review=tally[FLAGGED[1]],
        notified=tally[NOTIFIED], lost=tally[LOST],
        duplicate_analyses=sum(n - excused[sha] for sha, n in again.items()),
        cut_by_kills=sum(excused.values()),
        conflicting_writes=done.conflicts,
        duplicate_rows=sum(n - 1 for n in rows_per_photo.values()),
        layer_edits=sum(len(rows) for rows in seen.history.values())
        + sum(len(writes) for _, writes in seen.table_rows.values()),
        ai_calls=calls,
        ai_calls_per_analysed=round(calls / analysed, 3) if analysed else None,
        outage_ai_calls=sum(n for _, _, n in seen.outages),
        recovery_lag_s=_recovery_lag(seen), peak_concurrent_calls=seen.peak_in_flight,
        drain_s=_drain(seen, done), time_to_result_p50_s=_quantile(waited, 0.5),
        time_to_result_p95_s=_quantile(waited, 0.95),
        dead_by_cause=dict(Counter(m.cause for m in seen.messages if m.cause.strip())))


def _cut_by_kills(seen: Observed, done: Replay) -> Counter:
    """Per SHA-256, the usable answers an engine's death took from it: their clients closed
    the connection (the answer waiting on it, or gone out whole on it) within
    :data:`KILL_GRACE_S` after the death, and the layer did not show the photo by then."""
    def on_layer_by(sha: str, died: float) -> bool:
        return done.states.get(sha) in _DONE and done.since[sha] <= died

    cut: Counter = Counter()
    for at, sha, outcome in list(seen.left) + list(seen.closed):
        if outcome == "ok" and any(0 <= at - died <= KILL_GRACE_S and not on_layer_by(sha, died)
                                   for died in seen.deaths):
            cut[sha] += 1
    return cut


def _quantile(values: Sequence[float], q: float) -> Optional[float]:
    """The ``q`` quantile of ``values`` (nearest rank), rounded to the millisecond."""
    if not values:
        return None
    ordered = sorted(values)
    return round(max(0.0, ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]), 3)


def _recovery_lag(seen: Observed) -> Optional[float]:
    """Real seconds from the last outage's end to the first usable answer after it."""
    if not seen.outages:
        return None
    end = max(e for _, e, _ in seen.outages)
    after = [t for t, _, outcome in seen.vision_log if outcome == "ok" and t >= end]
    return round((min(after) - end) * seen.time_scale, 3) if after else None


def _drain(seen: Observed, done: Replay) -> Optional[float]:
    """Real seconds from the run's start to the moment the last photo reached the state it
    ends in (analysed, flagged, told): when nothing more changed for anyone looking. A
    rewrite that changes nothing, or a message about a photo gone from the layer, is not
    waited for."""
    changed = [at for at in done.since.values() if at > seen.started]
    return round(max(changed) - seen.started, 3) if changed else None
