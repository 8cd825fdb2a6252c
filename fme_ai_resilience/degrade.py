"""The degradation ladder L0-L4: what the processor still does when the pipeline is strained.

Levels are cumulative (shared/DESIGN.md section 5)::

    L0 NORMAL         everything analysed with the primary model
    L1 SAMPLE         non-critical asset types: only a sample analysed, the rest SKIPPED
    L2 FALLBACK       as L1, with the fallback (lighter) model
    L3 CRITICAL_ONLY  only critical asset types analysed, with the fallback model
    L4 PAUSED         no AI call: keep photo and metadata, defer analysis for the backfill

:func:`next_state` is pure: signals (backlog against the watermark, the primary service's
error rate, breaker states) + the persisted :class:`LadderState` + ``now`` -> the new state.
It climbs at once and descends one level at a time after the signals have stayed below
``exit_ratio`` x their thresholds for ``hold_s`` (hysteresis: no flapping). An operator's
override replaces the computed level until cleared. :class:`Degradation` persists the state
through the store (compare-and-set on a generation) so every engine sees one level.
"""
from __future__ import annotations

import enum
import logging
import math
import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Optional, Union

from .breaker import BreakerMode, BreakerState, CircuitBreaker, CircuitState
from .clock import Clock, SystemClock
from .ledger import CallWindow
from .settings import DegradeSettings, IntakeSettings, Settings

if TYPE_CHECKING:  # pragma: no cover
    from .store.base import Store

log = logging.getLogger(__name__)


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
        if raw.upper().startswith("L") and raw[1:].isdigit():
            raw = raw[1:]
        try:
            return cls(int(raw)) if raw.isdigit() else cls[raw.upper().replace("-", "_")]
        except (KeyError, ValueError):
            raise ValueError(f"not a degradation level: {text!r} (L0-L4)") from None


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
        if not (self.backlog_ratio >= 0 and math.isfinite(self.backlog_ratio)):
            raise ValueError(f"backlog_ratio must be >= 0, got {self.backlog_ratio!r}")
        if not 0 <= self.error_rate <= 1:
            raise ValueError(f"error_rate must be between 0 and 1, got {self.error_rate!r}")
        object.__setattr__(self, "primary", CircuitState(self.primary))
        if self.fallback is not None:
            object.__setattr__(self, "fallback", CircuitState(self.fallback))

    @classmethod
    def measured(cls, backlog: int, watermark: int, window: CallWindow,
                 primary: CircuitState = CircuitState.CLOSED,
                 fallback: Optional[CircuitState] = None) -> "Signals":
        """Signals from a backlog count, the watermark and the primary's call window."""
        if watermark <= 0:
            raise ValueError(f"watermark must be > 0, got {watermark!r}")
        return cls(backlog_ratio=max(0, backlog) / watermark, error_rate=window.failure_rate,
                   primary=primary, fallback=fallback)


def effective_state(state: BreakerState) -> CircuitState:
    """How a circuit looks to callers: a forced mode counts as OPEN or CLOSED."""
    if state.mode is BreakerMode.FORCED_OPEN:
        return CircuitState.OPEN
    if state.mode is not BreakerMode.AUTO:
        return CircuitState.CLOSED
    return state.state


def gather_signals(store: "Store", intake: IntakeSettings, primary: CircuitBreaker,
                   fallback: Optional[CircuitBreaker] = None,
                   now: Optional[float] = None) -> Signals:
    """Signals read from the ledger: backlog vs the watermark, the primary's window, breakers.

    For the compensator, which then calls :meth:`Degradation.observe`. ``now`` defaults to
    the primary breaker's clock.
    """
    now = primary.clock.now() if now is None else now
    backlog = store.backlog()   # in-progress rows through their index, not the whole ledger
    policy = primary.policy
    window = store.call_window(primary.service, now - policy.window_s, policy.slow_call_s)
    return Signals.measured(
        backlog, intake.effective_watermark(), window,
        primary=effective_state(primary.state()),
        fallback=None if fallback is None else effective_state(fallback.state()))


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
        if self.generation < 0:
            raise ValueError(f"generation must be >= 0, got {self.generation}")

    @property
    def effective(self) -> Level:
        """The level in force: the override if set, otherwise the computed level."""
        return self.override if self.override is not None else self.level


def _level_for(settings: DegradeSettings, signals: Signals, scale: float) -> Level:
    """The level the signals call for, with every threshold multiplied by ``scale``."""
    backlog = signals.backlog_ratio
    fallback_usable = signals.fallback not in (None, CircuitState.OPEN)
    if backlog >= settings.pause_backlog * scale or (
            signals.primary is CircuitState.OPEN and not fallback_usable):
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


def next_state(settings: DegradeSettings, state: LadderState, signals: Signals,
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
    down = Level(max(int(holding_level(settings, signals)), int(state.level) - 1))
    return replace(state, level=down, generation=state.generation + 1, changed_at=now,
                   calm_since=None)


def with_override(state: LadderState, level: Optional[Level], now: float) -> LadderState:
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
    """Whether a photo of ``asset_type`` gets an AI call at ``level`` (else SKIPPED/deferred).

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


class Degradation:
    """The fleet's shared ladder, persisted in the store and read through a short cache."""

    def __init__(self, store: "Store", settings: Optional[DegradeSettings] = None,
                 clock: Optional[Clock] = None, cache_ttl_s: float = 1.0) -> None:
        self.store = store
        self.settings = settings or DegradeSettings()
        self.clock = clock or SystemClock()
        self.cache_ttl_s = cache_ttl_s
        self._cached: Optional[LadderState] = None
        self._cached_at = -math.inf

    @classmethod
    def from_settings(cls, store: "Store", settings: Settings,
                      clock: Optional[Clock] = None) -> "Degradation":
        """The ladder the settings describe, read through the breaker's cache time."""
        return cls(store, settings.degrade, clock, cache_ttl_s=settings.breaker.cache_ttl_s)

    def __repr__(self) -> str:
        return f"Degradation(state={self._cached!r})"

    def state(self, fresh: bool = False) -> LadderState:
        """The shared ladder, from the cache unless older than ``cache_ttl_s``."""
        if fresh or self._cached is None or (
                self.clock.monotonic() - self._cached_at >= self.cache_ttl_s):
            self._remember(self.store.degrade_get(self.clock.now()))
        assert self._cached is not None
        return self._cached

    def _remember(self, state: LadderState) -> LadderState:
        self._cached = state
        self._cached_at = self.clock.monotonic()
        return state

    def _swap(self, change: Callable[[LadderState], LadderState]) -> LadderState:
        for _ in range(10):
            current = self.state(fresh=True)
            target = change(current)
            if target is current:
                return current
            if self.store.degrade_swap(current.generation, target):
                if target.effective != current.effective:
                    log.warning("degradation: %s -> %s%s", current.effective.label,
                                target.effective.label,
                                " (override)" if target.override is not None else "")
                return self._remember(target)
        raise RuntimeError("degradation state kept changing; update not applied")

    def observe(self, signals: Signals) -> LadderState:
        """Feed fresh signals (compensator or processor); returns the state now in force."""
        now = self.clock.now()
        return self._swap(lambda s: next_state(self.settings, s, signals, now))

    def set_override(self, level: Union[Level, str, int, None]) -> LadderState:
        """Hold the ladder at ``level`` until :meth:`clear_override` (None clears)."""
        wanted = None if level is None else Level.parse(level)
        now = self.clock.now()
        return self._swap(lambda s: with_override(s, wanted, now))

    def clear_override(self) -> LadderState:
        """Return to the computed level."""
        return self.set_override(None)

    def level(self) -> Level:
        """The level in force."""
        return self.state().effective

    def should_analyze(self, asset_type: Optional[str], key: str = "") -> bool:
        """Whether this photo gets an AI call now (False: SKIPPED, or deferred when paused)."""
        return should_analyze(self.settings, self.level(), asset_type, key)

    def model(self) -> Model:
        """The model to call now: primary, or the fallback from L2 up."""
        return model_for(self.level())

    def paused(self) -> bool:
        """True at L4: keep photo and metadata, defer every analysis for the backfill."""
        return self.level() >= Level.PAUSED
