"""The degradation ladder L0-L4: what the processor still does when the pipeline is strained.

Levels are cumulative (docs/breaker.md)::

    L0 NORMAL         everything analysed with the primary model
    L1 SAMPLE         critical asset types and a sample of the others analysed, the rest held
    L2 FALLBACK       as L1, with the fallback (lighter) model
    L3 CRITICAL_ONLY  only critical asset types analysed, with the fallback model
    L4 PAUSED         no AI call: every photo held

"Held" is what an operator's hold at that level does; a level the ladder computed holds
nothing back but the types the deployment lets it skip (see below), and from L2 up it calls
the fallback model.

The levels the ladder computes order the work and never idle an engine (:func:`admission`):
critical types are claimed first (:func:`priority_of`) and every photo an engine claims is
analysed, since a held-back photo is owed anyway and holding it while an engine is free only
makes it later. A level an operator holds (an override) holds photos back for real: owed, not
dropped, DEFERRED, shown on the layer as awaiting analysis and analysed once the hold ends.
Only a type the deployment names in ``non_critical_types``, with ``when_degraded=skip``, is
SKIPPED at a degraded level (manual review). The ladder climbs on the backlog without the
photos held back, so holding them back never keeps it up.

:func:`next_state` is pure: signals (backlog against the watermark, the primary service's
error rate, breaker states) + the persisted :class:`LadderState` + ``now`` -> the new state.
It climbs at once and, once the signals have stayed below ``exit_ratio`` x their thresholds
for ``hold_s`` (hysteresis: no flapping), descends to the level they still justify. An operator's
override replaces the computed level until cleared. The shared ladder
(``fme_ai_resilience.services.resilience.degrade.Degradation``) persists the state through the
store (compare-and-set on a generation) so every engine sees one level.
"""
from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass, replace
from typing import Optional, Tuple, Union

from .breaker import CircuitState
from ..checks import count, finite, ratio
from ..config.fields import (check_field, enum_field, name_fields, positive_fields,
                             ratio_fields)
from ..errors import ConfigurationError
from ..ledger import CallWindow, WhenDegraded

__all__ = ["DegradeSettings", "Level", "Model", "Admission", "Signals", "LadderState", "target_level",
           "holding_level", "next_state", "with_override", "sampled", "should_analyze",
           "admission", "priority_of", "model_for", "CRITICAL", "ORDINARY"]


@dataclass(frozen=True)
class DegradeSettings:
    """The degradation ladder L0-L4 (docs/breaker.md).

    Backlog thresholds are multiples of the intake watermark. A level is entered when its
    signal reaches the threshold and left only after every signal has stayed below
    ``exit_ratio`` x its threshold for ``hold_s`` seconds, then straight to the level the
    signals still justify (hysteresis).
    ``critical_types`` are asset types always analysed (until L4) and claimed first; at L1 a
    ``sample_ratio`` share of the others is still analysed. A photo a level holds back stays
    owed (DEFERRED, analysed once the ladder allows), unless its asset type is one of
    ``non_critical_types`` and ``when_degraded`` is ``skip``: then it is SKIPPED for manual
    review (never analysed, in the review queue).
    """

    sample_backlog: float = 1.0
    critical_backlog: float = 3.0
    pause_backlog: float = 6.0
    fallback_error_rate: float = 0.3
    exit_ratio: float = 0.7
    hold_s: float = 300.0
    sample_ratio: float = 0.25
    critical_types: Tuple[str, ...] = ()
    non_critical_types: Tuple[str, ...] = ()
    when_degraded: WhenDegraded = WhenDegraded.DEFER

    def __post_init__(self) -> None:
        positive_fields("degrade", self, "sample_backlog", "critical_backlog", "pause_backlog",
                  "hold_s")
        ratio_fields("degrade", self, "fallback_error_rate", "exit_ratio", "sample_ratio")
        check_field("degrade", "critical_backlog", self.critical_backlog,
               self.sample_backlog <= self.critical_backlog <= self.pause_backlog,
               "must lie between sample_backlog and pause_backlog")
        name_fields("degrade", self, "critical_types", "non_critical_types")
        enum_field("degrade", self, "when_degraded", WhenDegraded)
        both = sorted(set(self.critical_types) & set(self.non_critical_types))
        check_field("degrade", "non_critical_types", self.non_critical_types, not both,
               f"names {both} also in degrade.critical_types")

#: Claim priorities: a critical asset type's photo is claimed before any other.
CRITICAL = 1
ORDINARY = 0


class Level(enum.IntEnum):
    """A rung of the ladder; higher is more degraded."""

    NORMAL = 0
    SAMPLE = 1
    FALLBACK = 2
    CRITICAL_ONLY = 3
    PAUSED = 4

    @property
    def label(self) -> str:
        return f"L{int(self)}"

    @classmethod
    def parse(cls, text: Union[str, int, "Level"]) -> "Level":
        """``"L2"``, ``"2"``, ``2`` or ``"fallback"`` -> :attr:`FALLBACK`; ValueError otherwise."""
        raw = str(int(text)) if isinstance(text, int) else str(text).strip()
        if not (raw.isascii() and 0 < len(raw) <= 16):   # ASCII only: no other scripts' digits
            raise ConfigurationError("level", text, "is not a degradation level (L0-L4)")
        if raw.upper().startswith("L") and raw[1:].isdigit():
            raw = raw[1:]
        try:
            return cls(int(raw)) if raw.isdigit() else cls[raw.upper().replace("-", "_")]
        except (KeyError, ValueError):
            raise ConfigurationError("level", text, "is not a degradation level (L0-L4)") \
                from None


class Admission(str, enum.Enum):
    """What the processor does with a photo at the level in force."""

    ANALYSE = "analyse"   # call the Vision AI now
    DEFER = "defer"       # held back: DEFERRED (cause degraded), analysed once the ladder allows
    SKIP = "skip"         # the deployment's skip policy: SKIPPED for manual review


class Model(str, enum.Enum):
    """Which Vision AI model the processor calls."""

    PRIMARY = "primary"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class Signals:
    """What the ladder looks at.

    ``backlog_ratio`` is due-or-running tasks / watermark; ``error_rate`` the primary service's
    failure rate over the breaker window; ``fallback`` is None when no fallback model exists.
    """

    backlog_ratio: float = 0.0
    error_rate: float = 0.0
    primary: CircuitState = CircuitState.CLOSED
    fallback: Optional[CircuitState] = None

    def __post_init__(self) -> None:
        finite("backlog_ratio", self.backlog_ratio, minimum=0)
        ratio("error_rate", self.error_rate)
        object.__setattr__(self, "primary", CircuitState(self.primary))
        if self.fallback is not None:
            object.__setattr__(self, "fallback", CircuitState(self.fallback))

    @classmethod
    def measured(cls, backlog: int, watermark: int, window: CallWindow,
                 primary: CircuitState = CircuitState.CLOSED,
                 fallback: Optional[CircuitState] = None, min_calls: int = 1) -> "Signals":
        """Signals from a backlog count, the watermark and the primary's call window.

        A window of fewer than ``min_calls`` calls says nothing about the error rate (one
        failed call is not a 100 % failure rate): it counts as 0, as the breaker reads it.
        """
        count("watermark", watermark, minimum=1)
        count("min_calls", min_calls, minimum=1)
        rate = window.failure_rate if window.calls >= min_calls else 0.0
        return cls(backlog_ratio=max(0, backlog) / watermark, error_rate=rate,
                   primary=primary, fallback=fallback)


@dataclass(frozen=True)
class LadderState:
    """The persisted ladder (one ``degradation_state`` row).

    ``level`` is the computed level; ``override`` an operator's level (None: automatic);
    ``calm_since`` when the signals last fell below the current level's exit thresholds
    (None while they are above).
    """

    level: Level = Level.NORMAL
    override: Optional[Level] = None
    generation: int = 0
    changed_at: float = 0.0
    calm_since: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", Level(self.level))
        if self.override is not None:
            object.__setattr__(self, "override", Level(self.override))
        count("generation", self.generation)

    @property
    def effective(self) -> Level:
        """The level in force: the override if set, otherwise the computed level."""
        return self.override if self.override is not None else self.level


def _level_for(settings: DegradeSettings, signals: Signals, scale: float) -> Level:
    """The level the signals call for, with every threshold multiplied by ``scale``."""
    backlog = signals.backlog_ratio
    fallback_usable = signals.fallback not in (None, CircuitState.OPEN)
    # An open primary without a usable fallback needs no level: its breaker already defers
    # every task (no attempt counted) and lets them through the moment it closes, where a
    # pause would hold analysis back for another hold_s after the service recovered.
    if backlog >= settings.pause_backlog * scale:
        return Level.PAUSED
    if backlog >= settings.critical_backlog * scale:
        return Level.CRITICAL_ONLY
    # A half-open primary counts as closed: its probes must reach it for the round to end.
    if fallback_usable and (
            signals.primary is CircuitState.OPEN
            or 0 < signals.error_rate >= settings.fallback_error_rate * scale):
        return Level.FALLBACK
    if backlog >= settings.sample_backlog * scale:
        return Level.SAMPLE
    return Level.NORMAL


def target_level(settings: DegradeSettings, signals: Signals) -> Level:
    """The level the signals call for when climbing (entry thresholds)."""
    return _level_for(settings, signals, 1.0)


def holding_level(settings: DegradeSettings, signals: Signals) -> Level:
    """The level the signals still justify when descending (exit thresholds, lower)."""
    return _level_for(settings, signals, settings.exit_ratio)


def next_state(settings: DegradeSettings, state: LadderState, signals: Signals, *,
               now: float) -> LadderState:
    """The ladder after observing ``signals`` at ``now``; ``state`` itself when unchanged."""
    up = target_level(settings, signals)
    if up > state.level:
        return replace(state, level=up, generation=state.generation + 1, changed_at=now,
                       calm_since=None)
    if holding_level(settings, signals) >= state.level or state.level is Level.NORMAL:
        if state.calm_since is None:
            return state
        return replace(state, generation=state.generation + 1, calm_since=None)
    if state.calm_since is None:
        return replace(state, generation=state.generation + 1, calm_since=now)
    if now - state.calm_since < settings.hold_s:
        return state
    # Straight to what the signals still justify: stepping down through levels they no longer
    # call for would skip photos (L3, L1) or pause them for nothing.
    down = holding_level(settings, signals)
    return replace(state, level=down, generation=state.generation + 1, changed_at=now,
                   calm_since=None)


def with_override(state: LadderState, level: Optional[Level], *, now: float) -> LadderState:
    """``state`` with an operator's override set (a level) or cleared (None)."""
    if state.override == level:
        return state
    return replace(state, override=level, generation=state.generation + 1, changed_at=now)


# -- the questions the processor asks -------------------------------------------------------------
def sampled(key: str, ratio: float) -> bool:
    """Whether ``key`` falls in the analysed sample: stable across engines and redeliveries."""
    if ratio >= 1:
        return True
    return bool(key) and zlib.crc32(key.encode("utf-8")) / 2 ** 32 < ratio


def should_analyze(settings: DegradeSettings, level: Level, asset_type: Optional[str],
                   key: str = "") -> bool:
    """Whether a photo of ``asset_type`` gets an AI call at ``level`` (else held back).

    At L1/L2 a non-critical asset is analysed when its task ``key`` falls in the sample.
    """
    if level >= Level.PAUSED:
        return False
    if level is Level.NORMAL or (asset_type or "") in settings.critical_types:
        return True
    if level >= Level.CRITICAL_ONLY:
        return False
    return sampled(key, settings.sample_ratio)


def model_for(level: Level) -> Model:
    """The model to call at ``level``."""
    return Model.FALLBACK if level >= Level.FALLBACK else Model.PRIMARY


def admission(settings: DegradeSettings, level: Level, asset_type: Optional[str],
              key: str = "", *, operator_hold: bool) -> Admission:
    """What becomes of a photo of ``asset_type`` at ``level``: analysed, deferred (owed), or
    skipped, the last only for a type in ``non_critical_types`` under ``when_degraded=skip``.

    Only an operator's hold (``operator_hold``: the level is an override) defers a photo the
    level does not analyse. A level the ladder computed orders the work instead: critical
    types are claimed first (:func:`priority_of`), and a photo an engine has claimed is
    analysed, because holding it back while that engine is free would only make it later
    (it is owed either way) and idle the engine that could drain the backlog."""
    if should_analyze(settings, level, asset_type, key):
        return Admission.ANALYSE
    if (asset_type or "") in settings.non_critical_types \
            and settings.when_degraded is WhenDegraded.SKIP:
        return Admission.SKIP
    return Admission.DEFER if operator_hold else Admission.ANALYSE


def priority_of(settings: DegradeSettings, asset_type: Optional[str]) -> int:
    """The claim priority of a photo of ``asset_type``: CRITICAL for ``critical_types``."""
    return CRITICAL if (asset_type or "") in settings.critical_types else ORDINARY
