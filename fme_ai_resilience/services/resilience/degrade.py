"""The degradation ladder every engine shares, through the ledger's ``degradation_state`` row.

:class:`Degradation` reads the fleet's
:class:`~fme_ai_resilience.core.resilience.degrade.LadderState` through a short cache and writes
changes by compare-and-set on its generation;
:func:`gather_signals` reads what the ladder looks at (backlog against the watermark, the
primary service's failure rate, the breakers' states) for the compensator.
"""
from __future__ import annotations

import logging
import math
from typing import Callable, Optional, Union

from ...core.resilience.breaker import effective_state
from ...core.clock import Clock, SystemClock
from ...core.resilience.degrade import (Admission, LadderState, Level, Model, Signals, admission,
                                        model_for, next_state, should_analyze, with_override)
from ...core.errors import StoreError
from ...core.config.settings import Settings
from ...core.resilience.degrade import DegradeSettings
from ...core.intake.policy import IntakeSettings
from ...store.base import Store
from .breaker import CircuitBreaker

__all__ = ["Degradation", "gather_signals"]

log = logging.getLogger("fme_ai_resilience.core.resilience.degrade")


def gather_signals(intake: IntakeSettings, primary: CircuitBreaker,
                   fallback: Optional[CircuitBreaker] = None, *, store: Store,
                   now: float) -> Signals:
    """Signals read from the ledger: backlog vs the watermark, the primary's window, breakers.

    The backlog leaves out the photos the ladder holds back: they are owed, but counting them
    would keep the ladder up by its own doing (a pause that never ends). For the compensator,
    which then calls :meth:`Degradation.observe`.
    """
    backlog = store.ladder_backlog()   # in-progress rows through their index
    policy = primary.policy
    window = store.call_window(primary.service, now - policy.window_s, policy.slow_call_s)
    return Signals.measured(
        backlog, intake.capacity.watermark, window,
        primary=effective_state(primary.state()),
        fallback=None if fallback is None else effective_state(fallback.state()),
        min_calls=policy.min_calls)


class Degradation:
    """The fleet's shared ladder, persisted in the store and read through a short cache."""

    def __init__(self, settings: Optional[DegradeSettings] = None, *, store: Store,
                 clock: Optional[Clock] = None, cache_ttl_s: float = 1.0) -> None:
        self.store = store
        self.settings = settings or DegradeSettings()
        self.clock = clock or SystemClock()
        self.cache_ttl_s = cache_ttl_s
        self._cached: Optional[LadderState] = None
        self._cached_at = -math.inf

    @classmethod
    def from_settings(cls, settings: Settings, *, store: Store,
                      clock: Optional[Clock] = None) -> "Degradation":
        """The ladder the settings describe, read through the breaker's cache time."""
        return cls(settings.degrade, store=store, clock=clock,
                   cache_ttl_s=settings.breaker.cache_ttl_s)

    def __repr__(self) -> str:
        return f"Degradation(state={self._cached!r})"

    def state(self, fresh: bool = False) -> LadderState:
        """The shared ladder, from the cache unless older than ``cache_ttl_s``."""
        if fresh or self._cached is None or (
                self.clock.monotonic() - self._cached_at >= self.cache_ttl_s):
            self._remember(self.store.degrade_get(now=self.clock.now()))
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
                if _held_at(target) < _held_at(current):
                    # the photos held back come back at once, critical types claimed first
                    released = self.store.release_held(now=self.clock.now())
                    if released:
                        log.warning("degradation: %d photo(s) held back are due again",
                                    released)
                return self._remember(target)
        raise StoreError("degradation state kept changing; update not applied")

    def observe(self, signals: Signals) -> LadderState:
        """Feed fresh signals (compensator or processor); returns the state now in force."""
        now = self.clock.now()
        return self._swap(lambda s: next_state(self.settings, s, signals, now=now))

    def set_override(self, level: Union[Level, str, int, None]) -> LadderState:
        """Hold the ladder at ``level`` until :meth:`clear_override` (None clears)."""
        wanted = None if level is None else Level.parse(level)
        now = self.clock.now()
        return self._swap(lambda s: with_override(s, wanted, now=now))

    def clear_override(self) -> LadderState:
        """Return to the computed level."""
        return self.set_override(None)

    def level(self) -> Level:
        """The level in force."""
        return self.state().effective

    def should_analyze(self, asset_type: Optional[str], key: str = "") -> bool:
        """Whether this photo gets an AI call now (False: held back)."""
        return should_analyze(self.settings, self.level(), asset_type, key)

    def admission(self, asset_type: Optional[str], key: str = "") -> Admission:
        """What becomes of this photo now: analysed, deferred (owed: only under an operator's
        hold) or skipped by policy.

        A photo is held back or skipped only on the ladder as the store holds it now, never
        on a cached level: a level that just stepped down released the held photos, and an
        engine still caching the old one would hold them back again for ``hold_s``.
        """
        cached = self.state()
        decision = admission(self.settings, cached.effective, asset_type, key,
                             operator_hold=cached.override is not None)
        if decision is Admission.ANALYSE:
            return decision
        fresh = self.state(fresh=True)
        return admission(self.settings, fresh.effective, asset_type, key,
                         operator_hold=fresh.override is not None)

    def model(self) -> Model:
        """The model to call now: primary, or the fallback from L2 up."""
        return model_for(self.level())

    def paused(self) -> bool:
        """True at L4: keep photo and metadata, every analysis held back."""
        return self.level() >= Level.PAUSED


def _held_at(state: LadderState) -> Level:
    """The level whose holds are in force: an operator's override; a computed level holds
    nothing back (see :func:`~fme_ai_resilience.core.resilience.degrade.admission`)."""
    return state.override if state.override is not None else Level.NORMAL
