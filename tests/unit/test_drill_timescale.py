"""One time scale for every subject of a drill: every timeout and wait of the library's
settings and of every baseline goes through TimeScale.real, with one floor for all."""
from __future__ import annotations

import dataclasses
import random

import pytest
import requests

from fme_ai_resilience.drill import library
from fme_ai_resilience.drill.baselines import BASELINES, Job, Progress
from fme_ai_resilience.drill.run import BASELINE_NAMES, floored_timeouts
from fme_ai_resilience.drill.timescale import (NOT_SCALED, TIMEOUT_FLOOR_S, TimeScale,
                                               setting_times)
from fme_ai_resilience.core.config.settings import Settings

from helpers.drill_world import settings_world

SCALES = (0.001, 0.01, 0.04, 0.1, 1.0)
#: Set by the drill from the scenario and the run, not scaled from the defaults.
SET_BY_THE_DRILL = {"intake.mean_processing_s", "compensation.reconcile_window_s"}


class Clock:
    def __init__(self):
        self.slept = []

    def sleep(self, seconds):
        self.slept.append(seconds)

    def monotonic(self):
        return 0.0

    def now(self):
        return 0.0


class Spy:
    """Every call to TimeScale.real: (factor, production s, timeout?)."""

    def __init__(self, monkeypatch):
        self.calls = []
        real = TimeScale.real

        def spy(scale, production_s, *, timeout=False):
            self.calls.append((scale.factor, production_s, timeout))
            return real(scale, production_s, timeout=timeout)

        monkeypatch.setattr(TimeScale, "real", spy)


def test_every_time_of_every_settings_group_is_one_the_drill_scales():
    """Every field named *_s or *_per_s of the settings (but the database's own, the
    machine's) is a time the drill scales, so no timeout is left at production length."""
    defaults = Settings()
    found = set()
    for group in dataclasses.fields(defaults):
        values = getattr(defaults, group.name)
        if not dataclasses.is_dataclass(values) or group.name in NOT_SCALED:
            continue
        found |= {f"{group.name}.{f.name}" for f in dataclasses.fields(values)
                  if f.name.endswith("_s") and isinstance(getattr(values, f.name), float)}
    assert found and found <= set(setting_times())
    assert {"timeouts.ttfb_s", "timeouts.connect_s", "arcgis.request_timeout_s",
            "breaker.probe_timeout_s"} <= {n for n, (_, k) in setting_times().items()
                                           if k == "timeout"}


@pytest.mark.parametrize("scale", SCALES)
def test_every_timeout_of_every_subject_is_scaled_by_the_one_function(scale, monkeypatch):
    """The library's settings and each baseline's connect and transfer timeouts and waits
    are TimeScale.real of their production values at the drill's one factor: nothing else
    scales a time, and one floor holds for every subject."""
    spy = Spy(monkeypatch)
    values = library.drill_settings(settings_world(), engines=4, time_scale=scale)
    one = TimeScale(scale)
    for name, (production, kind) in setting_times().items():
        if name in SET_BY_THE_DRILL:
            continue
        want = (one.rate(production) if kind == "rate"
                else one.real(production, timeout=kind == "timeout"))
        assert float(values[name]) == pytest.approx(want, rel=1e-5), name
    for name in BASELINE_NAMES:
        chosen = BASELINES[name]
        clock = Clock()
        job = Job(chosen, vision_url="http://127.0.0.1:1/", time_scale=scale, clock=clock,
                  rng=random.Random(1), session=requests.Session(), progress=Progress())
        assert job.timeout == (one.real(chosen.connect_timeout_s, timeout=True),
                               one.real(chosen.transfer_timeout_s, timeout=True)), name
        job.pause(2.0)
        assert clock.slept == [one.real(2.0)], name
    calls = list(spy.calls)
    assert {factor for factor, _, _ in calls} == {scale}
    timed_out = {p for _, p, timeout in calls if timeout}
    assert {BASELINES[n].connect_timeout_s for n in BASELINE_NAMES} <= timed_out
    assert {v for n, (v, k) in setting_times().items() if k == "timeout"} <= timed_out


def test_at_the_default_scale_the_librarys_time_to_first_byte_is_the_production_one():
    """At 0.1 the library waits 20 production seconds for a first byte, as it ships (no real
    floor of its own stretches it to 50), exactly as a baseline's 30 s is 30 s."""
    settings = Settings().with_values(library.drill_settings(settings_world(), engines=4,
                                                             time_scale=0.1))
    assert settings.timeouts.ttfb_s / 0.1 == pytest.approx(Settings().timeouts.ttfb_s)
    assert settings.breaker.slow_call_s / 0.1 == pytest.approx(Settings().breaker.slow_call_s)


def test_a_timeout_no_machine_honours_is_raised_to_the_same_floor_for_all_and_said():
    """Far compressed, every subject's timeouts meet the same floor, and the report's note
    names each one raised, for the library and the baselines alike."""
    tiny = TimeScale(0.001)
    assert tiny.real(20.0, timeout=True) == tiny.real(90.0, timeout=True) == TIMEOUT_FLOOR_S
    assert tiny.real(20.0) == pytest.approx(0.02)      # a wait is honoured at any length
    floored = floored_timeouts(0.01, BASELINE_NAMES)
    assert any(n.startswith("fme-ai-resilience timeouts.connect_s 3 s") for n in floored)
    assert any(n.startswith("naive connect 30 s (0.3 s real) raised to 0.5 s real") for n in
               floored)
    assert not any("transfer" in n and "httpcaller" in n for n in floored)   # 0.9 s real
    assert floored_timeouts(1.0, BASELINE_NAMES) == []
