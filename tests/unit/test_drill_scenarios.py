"""The drill's new weather says what it plays: a slow service above the default time to first
byte and inside the task's budget, a slowdown that recovers, an outage of minutes while
deliveries go on, a layer refusing edits, answers cut short, a quota whose Retry-After is a
minute; ``drill --scenario all`` plays every scenario and ends with one verdict."""
from __future__ import annotations

import dataclasses

import pytest

from fme_ai_resilience.cli import drill as drill_cli
from fme_ai_resilience.cli import main
from fme_ai_resilience.drill.scenarios import ALL, SCENARIOS, plan_deliveries
from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.drill.standins.vision_faults import Quota
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.config.settings import Settings

from helpers.drill_reports import sample_report


DEFAULTS = Settings()
#: The task's budget: at most 1.5 x the business latency promise (docs/retries.md).
TASK_BUDGET_S = 1.5 * DEFAULTS.intake.latency_promise_s


def test_a_slow_vision_ai_answers_after_the_default_first_byte_and_inside_the_budget():
    """25-35 s a call: every call later than the 20 s default, none near the task budget."""
    f = SCENARIOS["slow"].faults
    assert f.latency_at(0.0) > DEFAULTS.timeouts.ttfb_s
    assert f.latency_at(0.0) + f.latency_jitter_s < TASK_BUDGET_S / 4


def test_a_slowdown_passes_the_default_first_byte_and_recovers():
    """The latency follows its profile: fast, then past the 20 s default, then fast again."""
    f = SCENARIOS["slowdown"].faults
    assert f.latency_at(0.0) < DEFAULTS.timeouts.ttfb_s / 4
    assert max(f.latency_at(t) for t in range(0, 400, 5)) > DEFAULTS.timeouts.ttfb_s
    assert f.latency_at(400.0) < DEFAULTS.timeouts.ttfb_s / 4
    assert f.latency_at(80.0) == pytest.approx(2.0 + (35.0 - 2.0) * 60 / 120)


def test_a_long_outage_lasts_minutes_while_deliveries_go_on():
    """The long outage is minutes long and photos keep arriving during it."""
    scenario = SCENARIOS["longoutage"]
    start, end = scenario.outage
    assert end - start >= 300
    times = [d.at_s for d in plan_deliveries(scenario, [{}] * 60, seed=1, time_scale=1.0)]
    assert sum(start <= t < end for t in times) >= 30 and max(times) > end


def test_the_layer_refuses_edits_for_minutes_while_photos_keep_coming():
    """The read-only layer refuses every edit for three minutes inside the deliveries."""
    scenario = SCENARIOS["readonly"]
    ((start, end),) = scenario.edit_refusals
    assert end - start >= 180 and start < scenario.spread_s < end
    assert scenario.faults_end_s == end


def test_answers_are_cut_short_for_a_third_of_the_calls():
    """A third of the calls reaching the model are cut mid-body, either way it happens."""
    f = SCENARIOS["cutoff"].faults
    assert f.truncated_rate == pytest.approx(0.3) and f.truncated_mode == "either"
    assert SCENARIOS["cutoff"].transient_rate == pytest.approx(0.3)


def test_a_per_minute_quota_says_to_retry_when_its_minute_ends():
    """30 calls a minute: the 31st call of a minute is told to wait until the minute ends,
    up to 60 s; the next minute holds 30 again."""
    f = SCENARIOS["quota"].faults
    assert f.burst == 30
    quota = Quota(f.burst, f.rate_window_s)
    assert all(quota.take(t * 0.1) is None for t in range(30))
    assert quota.take(3.0) == pytest.approx(57.0)
    assert quota.take(59.0) == pytest.approx(1.0)
    assert quota.take(60.0) is None


def test_a_latency_profile_and_a_quota_window_are_checked_as_every_fault():
    """A profile going back in time, a window without a rate: a clear error naming the field."""
    with pytest.raises(ConfigurationError, match="latency_profile"):
        FaultSchedule(latency_profile=((10.0, 1.0), (5.0, 2.0)))
    with pytest.raises(ConfigurationError, match="rate_window_s"):
        FaultSchedule(rate_window_s=60.0)


def test_every_scenario_says_what_a_real_deployment_meets():
    """Each scenario names the real situation it plays (docs/drill.md lists them)."""
    assert all(s.meets for s in SCENARIOS.values())
    assert {"slow", "slowdown", "longoutage", "readonly", "cutoff", "quota"} <= set(SCENARIOS)


def test_scenario_all_runs_every_scenario_and_ends_with_one_verdict(monkeypatch, capsys):
    """``--scenario all``: every scenario once, in order, each report printed, and one
    verdict line over all of them last."""
    played = []

    def run_drill(name, **kw):
        played.append(name)
        return dataclasses.replace(sample_report(), scenario=name, baselines={})

    monkeypatch.setattr(drill_cli, "run_drill", run_drill)
    code = main(["drill", "--scenario", ALL, "--compare", "none"])
    out = capsys.readouterr().out.splitlines()
    assert played == list(SCENARIOS)
    assert sum(line.startswith("drill: scenario ") for line in out) == len(SCENARIOS)
    assert [line for line in out if line.startswith("verdict: ")] == [out[-1]]
    assert f"in {len(SCENARIOS)} scenarios" in out[-1] and code == 1
