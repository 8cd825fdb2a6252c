"""The fleet's adaptive concurrency limit (``call_limit``) and its calls in flight
(``call_slot``), and the run of "down" failures in the call log, for every SQL backend.

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`. Taking a slot is one
transaction: the service's limit row is locked first (``FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` holds the file's write lock), then the live slots are counted and one is
added only while they are fewer than the limit allows, so engines on every host never take
more slots than the limit between them. Releasing a slot and moving the limit by the call's
sample is one transaction too. The decisions (how many slots a limit allows, how a sample
moves it) are the core's (:mod:`fme_ai_resilience.core.resilience.concurrency`), handed in.
"""
from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Tuple

from ..core.checks import count, finite, name
from ..core.resilience.concurrency import ConcurrencySettings, LimitState, room

__all__ = ["CallLimitOps", "limit_state_of"]


def limit_state_of(row: Mapping[str, Any]) -> LimitState:
    """A ``call_limit`` row as a :class:`LimitState`."""
    def optional(field: str) -> Optional[float]:
        value = row[field]
        return None if value is None else float(value)

    return LimitState(limit=max(1.0, float(row["limit_value"])), ttfb_s=optional("ttfb_s"),
                      rtt_long_s=optional("rtt_long_s"), rtt_peak_s=optional("rtt_peak_s"))


class CallLimitOps:
    """``call_limit``, ``call_slot`` and the call log's run of "down" failures.

    Mixed into a store that supplies ``_statement`` and ``_transact``.
    """

    _statement: Any
    _transact: Any

    def _locked_limit(self, tx: Any, params: Mapping[str, Any]) -> LimitState:
        rows = tx.run("limit_lock", params).rows
        if not rows:
            tx.run("limit_ensure", params)
            rows = tx.run("limit_lock", params).rows
        return limit_state_of(rows[0])

    def limit_read(self, service: str, settings: ConcurrencySettings, *,
                   now: float) -> Tuple[LimitState, int]:
        """The service's limit (its start when it has none yet; nothing is created) and the
        calls in flight at ``now``: a read, no lock."""
        params = {"service": name("service", service), "now": finite("now", now)}

        def work(tx: Any) -> Tuple[LimitState, int]:
            rows = tx.run("limit_get", params).rows
            state = limit_state_of(rows[0]) if rows else LimitState.initial(settings)
            return state, int(tx.run("slot_count", params).rows[0]["n"])

        return self._transact(work, write=False)

    def limit_acquire(self, service: str, holder: str, settings: ConcurrencySettings,
                      until: float, *, now: float) -> Tuple[Optional[int], LimitState, int]:
        """Take a slot for one call, counted in flight until ``until`` unless released first,
        when the limit has room (:func:`~fme_ai_resilience.core.resilience.concurrency.room`): ``(slot, state,
        in_flight)``, the slot None when it had none, ``in_flight`` the calls in flight then
        (the new one included). Slots past their time no longer count; the slot a release
        ends goes, and :meth:`prune_slots` removes the ones engines that died left."""
        params = {"service": name("service", service), "now": finite("now", now),
                  "holder": str(holder)[:200], "until": finite("until", until, above=now),
                  "start": float(settings.start)}

        def work(tx: Any) -> Tuple[Optional[int], LimitState, int]:
            state = self._locked_limit(tx, params)
            in_flight = int(tx.run("slot_count", params).rows[0]["n"])
            if not room(settings, state, in_flight):
                return None, state, in_flight
            slot = int(tx.run("slot_take", params).rows[0]["id"])
            return slot, state, in_flight + 1

        return self._transact(work)

    def limit_release(self, service: str, slot: Optional[int], settings: ConcurrencySettings,
                      update: Optional[Callable[[LimitState], LimitState]] = None, *,
                      hold_until: Optional[float] = None, now: float) -> LimitState:
        """End one call's slot (or, with ``hold_until``, keep it counted in flight until then:
        the engine gave up on the call but the service may still be computing it) and move the
        limit by ``update`` (the core's step for the call's sample), in one transaction.
        Returns the limit after it."""
        params = {"service": name("service", service), "now": finite("now", now),
                  "start": float(settings.start),
                  "slot": None if slot is None else count("slot", slot)}
        if hold_until is not None:
            params["until"] = finite("hold_until", hold_until)

        def work(tx: Any) -> LimitState:
            state = self._locked_limit(tx, params)
            if slot is not None:
                tx.run("slot_free" if hold_until is None else "slot_hold", params)
            if update is None:
                return state
            after = update(state)
            tx.run("limit_put", dict(params, limit=after.limit, ttfb_s=after.ttfb_s,
                                     rtt_long_s=after.rtt_long_s, rtt_peak_s=after.rtt_peak_s))
            return after

        return self._transact(work)

    def prune_slots(self, *, now: float) -> int:
        """Remove the slots of every service whose time has run out (an engine that died left
        them, or a call given up on was held until then); how many."""
        return self._statement("slot_prune_all", {"now": finite("now", now)}).rowcount

    def down_streak(self, service: str, limit: int) -> Tuple[int, int]:
        """How many of the service's latest logged calls (at most ``limit``, newest first)
        said in a row that it is down, and about how many photos."""
        rows: List[Mapping[str, Any]] = self._statement("down_streak", {
            "service": name("service", service), "limit": count("limit", limit, minimum=1)},
            write=False).rows
        keys = set()
        streak = 0
        for row in rows:
            if not row["down"]:
                break
            streak += 1
            keys.add(row["task_key"])
        return streak, len(keys)
