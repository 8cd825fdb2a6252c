"""The store-backed breaker against a simple reference model, over random calls and clock steps."""
from __future__ import annotations

import math
from typing import List, Optional

from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fme_ai_resilience.core.resilience.breaker import (BreakerMode, BreakerPolicy, CircuitOpen,
                                                       Manual, Permit)
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.store import open_store

POLICY = BreakerPolicy(failure_rate=0.5, min_calls=4, window_s=30.0, slow_call_s=5.0,
                       consecutive_failures=3, cooldown_s=10.0, cooldown_max_s=40.0,
                       cooldown_factor=2.0, half_open_probes=2, close_ratio=0.5,
                       probe_timeout_s=20.0, cache_ttl_s=1.0)


class Reference:
    """The breaker written the plain way: a list of calls and a few fields."""

    def __init__(self, now: float) -> None:
        self.state = "CLOSED"
        self.mode = "AUTO"
        self.since = now            # when the state last changed (the row is created now)
        self.open_until: Optional[float] = None
        self.trips = 0
        self.calls: List[tuple] = []   # (started_at, ok, slow)
        self.log: List[tuple] = []     # (down, photo), in the order calls were logged
        self.slots: List[dict] = []
        self.round = 0
        self.next_token = 0

    def _open(self, now: float) -> None:
        self.trips += 1
        cooldown = min(POLICY.cooldown_max_s, POLICY.cooldown_s * 2 ** (self.trips - 1))
        self.state, self.since, self.open_until = "OPEN", now, now + cooldown

    def _window_trips(self, now: float) -> bool:
        start = max(now - POLICY.window_s, self.since)
        recent = [c for c in self.calls if c[0] >= start]
        if len(recent) < POLICY.min_calls:
            return False
        failed = sum(1 for c in recent if not c[1]) / len(recent)
        return failed >= POLICY.failure_rate    # slow calls never trip: slow is not down

    def _streak_trips(self) -> bool:
        run = []
        for down, photo in reversed(self.log[-POLICY.consecutive_failures:]):
            if not down:
                break
            run.append(photo)
        return len(run) >= POLICY.consecutive_failures and len(set(run)) >= 2

    def _tick(self, now: float) -> None:
        if self.mode == "AUTO" and self.state == "OPEN" and now >= self.open_until:
            self.state, self.since, self.open_until = "HALF_OPEN", now, None
            self.round += 1
            self.slots = [{"token": None, "at": None, "ok": None}
                          for _ in range(POLICY.half_open_probes)]

    def allow(self, now: float):
        """("permit", probe) or ("refuse", retry_after)."""
        self._tick(now)
        if self.mode == "FORCED_OPEN":
            return ("refuse", POLICY.cooldown_s)
        if self.mode != "AUTO" or self.state == "CLOSED":
            return ("permit", None)
        if self.state == "OPEN":
            return ("refuse", self.open_until - now)
        for slot in self.slots:
            if slot["token"] is None:
                self.next_token += 1
                slot.update(token=self.next_token, at=now)
                return ("permit", (self.round, slot, self.next_token))
            if slot["ok"] is None and now >= slot["at"] + POLICY.probe_timeout_s:
                # a probe silent past the timeout is a failed probe; its late report is stale
                self.next_token += 1
                slot.update(token=self.next_token, at=now, ok=False)
                self._decide(now)
                if self.state != "HALF_OPEN":
                    return self.allow(now)
        return ("refuse", min(POLICY.probe_timeout_s, POLICY.cooldown_s))

    def record(self, probe, ok: bool, slow: bool, started_at: float, now: float,
               photo: str = "") -> None:
        """A failure that is ``slow`` here said the service is down (a 503)."""
        down = not ok and slow
        self.calls.append((started_at, ok, slow))
        self.log.append((down, photo))
        if probe is not None:
            round_, slot, token = probe
            if slot["token"] == token and slot["ok"] is None:
                slot["ok"] = ok
            if round_ == self.round and self.state == "HALF_OPEN" and self.mode == "AUTO":
                self._decide(now)
            return
        if self.mode == "AUTO" and self.state == "CLOSED" and not ok:
            if (down and self._streak_trips()) or self._window_trips(now):
                self._open(now)

    def _decide(self, now: float) -> None:
        results = [s["ok"] for s in self.slots if s["ok"] is not None]
        if len(results) < POLICY.half_open_probes:
            return
        if sum(results) >= math.ceil(POLICY.close_ratio * POLICY.half_open_probes - 1e-9):
            self.state, self.since, self.trips = "CLOSED", now, 0
        else:
            self._open(now)

    def evaluate(self, now: float) -> None:
        if self.mode != "AUTO":
            return
        if self.state == "OPEN":
            self._tick(now)
        elif self.state == "HALF_OPEN":
            for slot in self.slots:    # the compensator fails probes silent past the timeout
                if slot["token"] is not None and slot["ok"] is None \
                        and now >= slot["at"] + POLICY.probe_timeout_s:
                    slot["ok"] = False
            self._decide(now)
        elif self._window_trips(now):
            self._open(now)

    def command(self, command: Manual, now: float) -> None:
        if command is Manual.RESET:
            if not (self.mode == "AUTO" and self.state == "CLOSED" and self.trips == 0):
                self.state, self.mode, self.since = "CLOSED", "AUTO", now
                self.open_until, self.trips = None, 0
            return
        self.mode = {Manual.FORCE_OPEN: "FORCED_OPEN", Manual.FORCE_CLOSED: "FORCED_CLOSED",
                     Manual.DISABLE: "DISABLED"}[command]


class BreakerVersusReference(RuleBasedStateMachine):
    """Random begin/finish of calls, clock steps, compensator runs and operator commands."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.store = open_store("sqlite:///:memory:", init_schema=True)
        self.breaker = CircuitBreaker("vision", POLICY, store=self.store, clock=self.clock)
        self.breaker.state(fresh=True)      # creates the circuit row at the start time
        self.model = Reference(self.clock.now())
        self.in_flight: List[tuple] = []
        self.finished = 0

    def teardown(self) -> None:
        self.store.close()

    def _begin(self) -> None:
        decision = self.breaker.allow()
        expected = self.model.allow(self.clock.now())
        if expected[0] == "refuse":
            assert isinstance(decision, CircuitOpen), (decision, expected)
            assert math.isclose(decision.retry_after_s, expected[1], abs_tol=1e-6)
        else:
            assert isinstance(decision, Permit), (decision, expected)
            assert decision.is_probe == (expected[1] is not None)
            self.in_flight.append((decision, expected[1], self.clock.now()))

    def _finish(self, index: int, ok: bool, slow: bool) -> None:
        permit, probe, began = self.in_flight.pop(index % len(self.in_flight))
        duration = POLICY.slow_call_s + 1 if slow else 0.5
        self.finished += 1
        photo = f"p{self.finished % 3}"
        down = not ok and slow          # a failure drawn slow is a 503 that said down
        self.breaker.record(permit, CallRecord(
            service="vision", started_at=began, duration_s=duration,
            error_class=None if ok else "SERVER_ERROR", status_code=503 if down else 500,
            task_key=photo, down=down))
        self.model.record(probe, ok, slow, began, self.clock.now(), photo)

    @rule()
    def begin_call(self) -> None:
        self._begin()

    @rule(outcomes=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=6))
    def calls_one_after_another(self, outcomes) -> None:
        for ok, slow in outcomes:
            self._begin()
            if self.in_flight and self.in_flight[-1][2] == self.clock.now():
                self._finish(len(self.in_flight) - 1, ok, slow)

    @precondition(lambda self: self.in_flight)
    @rule(index=st.integers(min_value=0, max_value=10), ok=st.booleans(), slow=st.booleans())
    def finish_call(self, index: int, ok: bool, slow: bool) -> None:
        self._finish(index, ok, slow)

    @precondition(lambda self: self.in_flight)
    @rule(index=st.integers(min_value=0, max_value=10))
    def engine_dies(self, index: int) -> None:
        """A call whose engine vanished: it never reports (a probe's slot must time out)."""
        self.in_flight.pop(index % len(self.in_flight))

    @rule(seconds=st.sampled_from([0.25, 1.0, 3.0, 10.0, 21.0, 45.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def compensator(self) -> None:
        self.breaker.evaluate()
        self.model.evaluate(self.clock.now())

    @rule(command=st.sampled_from([None] * 6 + list(Manual)))
    def operator(self, command: Optional[Manual]) -> None:
        if command is None:     # operators act rarely: most draws do nothing
            return
        self.breaker.command(command)
        self.model.command(command, self.clock.now())

    @invariant()
    def same_state(self) -> None:
        actual = self.breaker.state(fresh=True)
        event(f"{actual.mode.value} {actual.state.value} trips={min(actual.trips, 2)}")
        assert actual.mode is BreakerMode(self.model.mode)
        if self.model.mode == "AUTO":
            # an open circuit past its cooldown turns half-open lazily on both sides
            assert actual.state.value == self.model.state, (actual, vars(self.model))
            assert actual.trips == self.model.trips
            assert actual.open_until == self.model.open_until


BreakerVersusReference.TestCase.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestBreakerVersusReference = BreakerVersusReference.TestCase
