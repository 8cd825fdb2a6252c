"""The rows of the breaker (``circuit_state``, ``circuit_probe``) and of the degradation ladder
(``degradation_state``), and their atomic operations, for every SQL backend.

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`: each operation is one
transaction through the backend's ``_transact``; the SQL is in ``sql/queries*.sql``. Every
change is a compare-and-set on a generation number; a half-open round's probe slots are rows
of ``circuit_probe`` created with the transition, claimed atomically (SKIP LOCKED on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..core.resilience.breaker import BreakerMode, BreakerState, CircuitState
from ..core.checks import count, finite, name
from ..core.resilience.degrade import LadderState, Level
from ..core.errors import ConfigurationError

__all__ = ["BreakerLadderOps", "breaker_state_of", "ladder_state_of"]


#: A time later than any slot (a finite number every backend compares).
_ANY_TIME = 1e300


def _seconds(field: str, value: Any) -> float:
    return finite(field, value)


def _service(value: Any) -> str:
    return name("service", value)


def _generation(field: str, value: Any) -> int:
    return count(field, value)


def breaker_state_of(row: Mapping[str, Any]) -> BreakerState:
    """A ``circuit_state`` row as a :class:`BreakerState`."""
    return BreakerState(state=CircuitState(row["state"]), mode=BreakerMode(row["mode"]),
                        generation=int(row["generation"]), changed_at=float(row["changed_at"]),
                        open_until=None if row["open_until"] is None else float(row["open_until"]),
                        trips=int(row["trips"]))


def ladder_state_of(row: Mapping[str, Any]) -> LadderState:
    """The ``degradation_state`` row as a :class:`LadderState`."""
    override = row["override_level"]
    return LadderState(level=Level(int(row["level"])),
                       override=None if override is None else Level(int(override)),
                       generation=int(row["generation"]), changed_at=float(row["changed_at"]),
                       calm_since=None if row["calm_since"] is None else float(row["calm_since"]))


class BreakerLadderOps:
    """``circuit_state``, ``circuit_probe`` and ``degradation_state`` operations.

    Mixed into a store that supplies ``_statement`` and ``_transact``.
    """

    _statement: Any
    _transact: Any

    def breaker_get(self, service: str, *, now: float) -> BreakerState:
        """The service's circuit; a missing one is created CLOSED, an existing one untouched."""
        params = {"service": _service(service), "now": _seconds("now", now)}
        rows = self._statement("breaker_get", params, write=False).rows
        if rows:
            return breaker_state_of(rows[0])

        def work(tx: Any) -> BreakerState:
            tx.run("breaker_ensure", params)
            return breaker_state_of(tx.run("breaker_get", params).rows[0])

        return self._transact(work)

    def breaker_peek(self, service: str) -> BreakerState:
        """The service's circuit as stored; a missing one reads as CLOSED/0 and is not created."""
        rows = self._statement("breaker_get", {"service": _service(service)}, write=False).rows
        return breaker_state_of(rows[0]) if rows else BreakerState()

    def breaker_list(self) -> Dict[str, BreakerState]:
        """Every circuit, by service."""
        return {r["service"]: breaker_state_of(r)
                for r in self._statement("breaker_list", write=False).rows}

    def breaker_swap(self, service: str, expected_generation: int, new: BreakerState,
                     probe_slots: int = 0) -> bool:
        """Write ``new`` only if the circuit is still at ``expected_generation``.

        The previous half-open round's slots are removed; ``probe_slots`` new ones (for a move
        to HALF_OPEN) are created in the same transaction. Returns whether it applied.
        """
        if not isinstance(new, BreakerState):
            raise ConfigurationError("new", type(new).__name__, "must be a BreakerState")
        if new.generation <= _generation("expected_generation", expected_generation):
            raise ConfigurationError("new.generation", new.generation,
                                     f"must exceed {expected_generation}")
        if _generation("probe_slots", probe_slots) and new.state is not CircuitState.HALF_OPEN:
            raise ConfigurationError("probe_slots", probe_slots,
                                     "probe slots belong to a HALF_OPEN circuit")
        params = {"service": _service(service), "expected": expected_generation,
                  "state": new.state.value, "mode": new.mode.value,
                  "generation": new.generation, "changed_at": _seconds("changed_at",
                                                                       new.changed_at),
                  "open_until": new.open_until, "trips": new.trips}

        def work(tx: Any) -> bool:
            if tx.run("breaker_swap", params).rowcount != 1:
                return False
            tx.run("probe_clear", params)
            for slot in range(probe_slots):
                tx.run("probe_slot", {"service": service, "slot": slot,
                                      "generation": new.generation})
            return True

        return self._transact(work)

    def breaker_claim_probe(self, service: str, generation: int, probe_timeout_s: float, *,
                            now: float) -> Optional[Tuple[int, int]]:
        """Claim one probe slot of round ``generation``: ``(slot, token)``, or None if none free."""
        now = _seconds("now", now)
        rows = self._statement("probe_claim", {
            "service": _service(service), "generation": _generation("generation", generation),
            "now": now, "stale_before": now - _seconds("probe_timeout_s", probe_timeout_s),
        }).rows
        return (int(rows[0]["slot"]), int(rows[0]["token"])) if rows else None

    def breaker_report_probe(self, service: str, generation: int, slot: int, token: int,
                             ok: bool, *, now: float) -> bool:
        """Record a probe's result; False for a stale claim or a second report."""
        return self._statement("probe_report", {
            "service": _service(service), "generation": _generation("generation", generation),
            "slot": _generation("slot", slot), "token": _generation("token", token),
            "ok": bool(ok), "now": _seconds("now", now)}).rowcount == 1

    def breaker_fail_silent_probes(self, service: str, generation: int,
                                   probe_timeout_s: float, *, now: float) -> int:
        """Count claimed probes of round ``generation`` silent past ``probe_timeout_s`` as failed.

        Returns how many were marked; their slots are not claimed again and a late report from
        them is refused.
        """
        now = _seconds("now", now)
        return self._statement("probe_fail_silent", {
            "service": _service(service), "generation": _generation("generation", generation),
            "failed": False, "now": now,
            "stale_before": now - _seconds("probe_timeout_s", probe_timeout_s)}).rowcount

    def breaker_probe_tally(self, service: str, generation: int) -> Tuple[int, int]:
        """``(successes, failures)`` reported in round ``generation``."""
        row = self._statement("probe_tally", {"service": _service(service),
                                        "generation": _generation("generation", generation)},
                        write=False).rows[0]
        return int(row["successes"]), int(row["failures"])

    def recent_calls(self, service: str, limit: int) -> List[Tuple[Optional[str], Optional[str]]]:
        """``(error_class, task_key)`` of ``service``'s latest ``limit`` calls, newest first
        (error class None: a success)."""
        rows = self._statement("recent_calls", {
            "service": _service(service), "limit": count("limit", limit, minimum=1)},
            write=False).rows
        return [(r["error_class"], r["task_key"]) for r in rows]

    def recent_retries(self, service: str,
                       limit: int) -> List[Tuple[Optional[str], Optional[str], bool]]:
        """``(error_class, task_key, retry)`` of ``service``'s latest ``limit`` calls, newest
        first (``retry``: not the task's first call to the service)."""
        rows = self._statement("recent_retries", {
            "service": _service(service), "limit": count("limit", limit, minimum=1)},
            write=False).rows
        return [(r["error_class"], r["task_key"], bool(r["retry"])) for r in rows]

    # -- the pace of a rate-limited service -----------------------------------------------------
    def pace_get(self, service: str) -> float:
        """The seconds between two calls of ``service`` (0: not paced)."""
        rows = self._statement("pace_get", {"service": _service(service)}, write=False).rows
        return float(rows[0]["interval_s"]) if rows else 0.0

    def pace_claim(self, service: str, *, now: float,
                   latest: Optional[float] = None) -> Optional[Tuple[float, float]]:
        """Take the next call slot of a paced ``service``: ``(slot_at, interval_s)``, the time
        the call may start and the interval in force; None when the service is not paced. One
        statement: every engine's claim moves the same slot on, so no two share one. A slot
        starting after ``latest`` (epoch seconds; default: any) is not taken, only shown
        (``slot_at > latest``): a caller that parks instead of waiting leaves it to others."""
        params = {"service": _service(service), "now": _seconds("now", now),
                  "latest": _ANY_TIME if latest is None else _seconds("latest", latest)}
        rows = self._statement("pace_claim", params).rows
        if not rows:
            return self.pace_next(service, now=now)
        return float(rows[0]["slot_at"]), float(rows[0]["interval_s"])

    def pace_next(self, service: str, *, now: float) -> Optional[Tuple[float, float]]:
        """A paced ``service``'s next free slot and its interval, ``(slot_at, interval_s)``,
        not taken; None when the service is not paced."""
        rows = self._statement("pace_next", {"service": _service(service),
                                             "now": _seconds("now", now)}, write=False).rows
        return (float(rows[0]["slot_at"]), float(rows[0]["interval_s"])) if rows else None

    def pace_shown(self, service: str, *, since: float,
                   before: float) -> Optional[Tuple[float, int]]:
        """What ``service`` showed it allows: ``(refused_at, taken)``, the start of its latest
        429 in ``[since, before)`` (epoch seconds) and how many calls that started after it and
        before ``before`` it took: those logged (anything but a 429) and those still in flight
        at ``before`` (a call is logged when it ends); None without a 429 in the range."""
        rows = self._statement("pace_shown", {"service": _service(service),
                                              "since": _seconds("since", since),
                                              "before": _seconds("before", before)},
                               write=False).rows
        return (float(rows[0]["refused_at"]), int(rows[0]["taken"])) if rows else None

    def pace_slow(self, service: str, interval_s: float, *, not_before: float) -> None:
        """Space the calls of ``service`` at least ``interval_s`` apart, none before
        ``not_before`` (epoch seconds): a 429 asked for it. Never shortens either."""
        self._statement("pace_slow", {"service": _service(service),
                                      "interval": finite("interval_s", interval_s, above=0),
                                      "not_before": _seconds("not_before", not_before)},
                        idempotent=True)

    def pace_relax(self, service: str, factor: float, floor_s: float) -> None:
        """One call of a paced ``service`` went through: its interval times ``factor``, and no
        pace at all below ``floor_s``."""
        self._statement("pace_relax", {"service": _service(service),
                                       "factor": finite("factor", factor, above=0, maximum=1),
                                       "floor": finite("floor_s", floor_s, minimum=0)})

    def degrade_get(self, *, now: float) -> LadderState:
        """The fleet's ladder; created at L0 if missing, never overwritten."""
        params = {"now": _seconds("now", now)}
        rows = self._statement("degrade_get", write=False).rows
        if rows:
            return ladder_state_of(rows[0])

        def work(tx: Any) -> LadderState:
            tx.run("degrade_ensure", params)
            return ladder_state_of(tx.run("degrade_get").rows[0])

        return self._transact(work)

    def degrade_swap(self, expected_generation: int, new: LadderState) -> bool:
        """Write ``new`` only if the ladder is still at ``expected_generation``."""
        if not isinstance(new, LadderState):
            raise ConfigurationError("new", type(new).__name__, "must be a LadderState")
        if new.generation <= _generation("expected_generation", expected_generation):
            raise ConfigurationError("new.generation", new.generation,
                                     f"must exceed {expected_generation}")
        return self._statement("degrade_swap", {
            "expected": expected_generation, "level": int(new.level),
            "override": None if new.override is None else int(new.override),
            "generation": new.generation, "changed_at": _seconds("changed_at", new.changed_at),
            "calm_since": new.calm_since,
            "now": max(new.changed_at, new.calm_since or 0.0)}).rowcount == 1
