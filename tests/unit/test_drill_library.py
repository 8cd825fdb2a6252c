"""The library's side of a drill: its scaled settings and when its reconciliation runs."""
from __future__ import annotations


from fme_ai_resilience.drill import library
from fme_ai_resilience.core.config.settings import Settings

from helpers.drill_world import settings_world


def test_the_fleet_retry_floor_allows_the_defaults_retries_per_window_at_any_time_scale():
    """A window scaled down by the time scale holds as many floor retries as the defaults'
    window: the per-second floor is scaled up by the same factor."""
    default = Settings().retry
    for scale in (0.1, 0.5, 1.0):
        retry = Settings().with_values(library.drill_settings(
            settings_world(), engines=4, time_scale=scale)).retry
        assert retry.fleet_window_s == default.fleet_window_s * scale
        assert abs(retry.fleet_retry_floor_per_s * retry.fleet_window_s
                   - default.fleet_retry_floor_per_s * default.fleet_window_s) < 1e-9


class Ledger:
    """A ledger whose tasks the engines (the sleeps between looks) settle one at a time."""

    def __init__(self, owed):
        self.owed = owed
        self.looks = 0

    def backlog(self, limit=None):
        return self.owed

    def requeue_candidates(self, failure_class, budget, limit):
        return []


class Fleet:
    def __init__(self):
        self.healed = 0

    def heal(self):
        self.healed += 1


class WS03:
    """WS-03's passes, each ending at a time (real s after the start)."""

    def __init__(self, passes):
        self.passes = passes

    def passed_after(self, at):
        return any(done > at for done in self.passes)


def test_the_run_ends_once_ws03_passed_after_the_last_delivery_and_every_task_settled(
        monkeypatch):
    """Nothing the drill sees starts a pass: the run waits for WS-03's own pass after the
    last delivery was answered, and for every task to settle, healing engines meanwhile."""
    ledger, fleet = Ledger(owed=3), Fleet()
    ws03 = WS03([1.0])
    clock = {"now": 0.0}

    def sleep(seconds):
        clock["now"] += seconds
        ledger.owed = max(0, ledger.owed - 1)
        if clock["now"] > 0.5:
            ws03.passes.append(9.0)   # WS-03's next mark, after the last delivery

    monkeypatch.setattr(library.time, "sleep", sleep)
    monkeypatch.setattr(library.time, "monotonic", lambda: clock["now"])
    assert library._until_settled(Settings(), fleet, ws03, store=ledger, answered=5.0,
                                  deadline=60.0)
    assert ledger.owed == 0 and clock["now"] > 0.5 and fleet.healed > 3


def test_a_run_that_never_settles_stops_at_its_horizon(monkeypatch):
    """No WS-03 pass after the last delivery: the run is not settled at the horizon."""
    clock = {"now": 0.0}
    monkeypatch.setattr(library.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    monkeypatch.setattr(library.time, "monotonic", lambda: clock["now"])
    assert not library._until_settled(Settings(), Fleet(), WS03([1.0]), store=Ledger(0),
                                      answered=5.0, deadline=2.0)
    assert clock["now"] >= 2.0


def test_the_run_waits_for_ws03_to_tell_of_a_dead_letter_even_with_nothing_owed(monkeypatch):
    """A photo gone from the layer (a NOT_FOUND dead letter) is told at WS-03's next pass:
    with every task settled and nothing owed on the layer, the run still waits for it."""
    clock = {"now": 0.0}
    told = {"done": False}

    def sleep(seconds):
        clock["now"] += seconds
        told["done"] = clock["now"] > 3.0        # WS-03's next mark hands it to the Emailer

    monkeypatch.setattr(library.time, "sleep", sleep)
    monkeypatch.setattr(library.time, "monotonic", lambda: clock["now"])
    assert library._until_settled(Settings(), Fleet(), WS03([]), store=Ledger(0),
                                  answered=0.0, deadline=60.0, nothing_owed=lambda: True,
                                  told_all=lambda: told["done"])
    assert clock["now"] > 3.0
