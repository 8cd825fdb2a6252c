"""The narrow views of the ledger the resilience services work with; ``Store`` is their union.

Each protocol names the operations of one capability, as the store's mixins group them
(:mod:`.breaker_ladder`, :mod:`.call_limits`, the call log of :mod:`.sqlbase`): a service is
typed against the one it uses, so what it may do to the ledger reads off its signature. Every
:class:`~fme_ai_resilience.store.sqlbase.SqlStore` satisfies them all, and so does anything
satisfying :class:`~fme_ai_resilience.store.base.Store`.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Protocol, Tuple

from ..core.resilience.breaker import BreakerState
from ..core.resilience.concurrency import ConcurrencySettings, LimitState
from ..core.ledger import CallRecord, CallWindow

__all__ = ["CallLogRows", "BreakerRows", "PaceRows", "LimitRows", "LeaseRows"]


class CallLogRows(Protocol):
    """``ai_call_log``: one row per outbound call, read as windows and runs."""

    def record_call(self, call: CallRecord) -> None:
        """Append one outbound call."""

    def call_window(self, service: str, since: float, slow_s: float) -> CallWindow:
        """Calls, failures, slow calls and retries since ``since``."""

    def recent_calls(self, service: str, limit: int) -> List[Tuple[Optional[str], Optional[str]]]:
        """``(error_class, task_key)`` of the service's latest calls, newest first."""

    def recent_retries(self, service: str,
                       limit: int) -> List[Tuple[Optional[str], Optional[str], bool]]:
        """``(error_class, task_key, retry)`` of the latest calls, newest first."""

    def down_streak(self, service: str, limit: int) -> Tuple[int, int]:
        """The run of latest calls that said the service is down, and its photos."""


class BreakerRows(CallLogRows, Protocol):
    """``circuit_state`` and ``circuit_probe`` (and the call log the breaker reads)."""

    def breaker_get(self, service: str, *, now: float) -> BreakerState:
        """The service's circuit, created CLOSED when missing."""

    def breaker_list(self) -> Dict[str, BreakerState]:
        """Every circuit, by service."""

    def breaker_swap(self, service: str, expected_generation: int, new: BreakerState,
                     probe_slots: int = 0) -> bool:
        """Compare-and-set on the generation."""

    def breaker_claim_probe(self, service: str, generation: int, probe_timeout_s: float, *,
                            now: float) -> Optional[Tuple[int, int]]:
        """Claim one half-open probe slot: ``(slot, token)`` or None."""

    def breaker_report_probe(self, service: str, generation: int, slot: int, token: int,
                             ok: bool, *, now: float) -> bool:
        """Record a probe's result."""

    def breaker_fail_silent_probes(self, service: str, generation: int,
                                   probe_timeout_s: float, *, now: float) -> int:
        """Count probes silent past their time as failed."""

    def breaker_probe_tally(self, service: str, generation: int) -> Tuple[int, int]:
        """``(successes, failures)`` of a round."""


class PaceRows(Protocol):
    """``call_pace``: the fleet's pace for a rate-limited service."""

    def pace_get(self, service: str) -> float:
        """The seconds between two calls (0: not paced)."""

    def pace_claim(self, service: str, *, now: float,
                   latest: Optional[float] = None) -> Optional[Tuple[float, float]]:
        """Take the next call slot: ``(slot_at, interval_s)``."""

    def pace_next(self, service: str, *, now: float) -> Optional[Tuple[float, float]]:
        """The next free slot, ``(slot_at, interval_s)``, not taken."""

    def pace_shown(self, service: str, *, since: float,
                   before: float) -> Optional[Tuple[float, int]]:
        """``(refused_at, taken)``: the latest 429 in a range, the calls taken after it
        (logged or still in flight)."""

    def pace_slow(self, service: str, interval_s: float, *, not_before: float) -> None:
        """Space the calls further, none before ``not_before``."""

    def pace_relax(self, service: str, factor: float, floor_s: float) -> None:
        """A call went through: the interval shrinks."""


class LimitRows(Protocol):
    """``call_limit`` and ``call_slot``: the fleet's adaptive concurrency limit."""

    def limit_read(self, service: str, settings: ConcurrencySettings, *,
                   now: float) -> Tuple[LimitState, int]:
        """The limit and the calls in flight."""

    def limit_acquire(self, service: str, holder: str, settings: ConcurrencySettings,
                      until: float, *, now: float) -> Tuple[Optional[int], LimitState, int]:
        """Take a slot when the limit has room."""

    def limit_release(self, service: str, slot: Optional[int], settings: ConcurrencySettings,
                      update: Optional[Callable[[LimitState], LimitState]] = None, *,
                      hold_until: Optional[float] = None, now: float) -> LimitState:
        """End (or hold) a slot and move the limit, in one transaction."""


class LeaseRows(Protocol):
    """The lease of a claimed task, fenced by its token."""

    def renew(self, key: str, token: int, lease_s: float, *, now: float) -> bool:
        """Extend a live lease; False when it is another holder's."""
