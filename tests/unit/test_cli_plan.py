"""The ``plan`` command and the command line's entry points."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from fme_ai_resilience import __version__
from fme_ai_resilience.cli import main

SEED = ["plan", "--engines", "8", "--mean-seconds", "20", "--latency-seconds", "120"]


@pytest.fixture(autouse=True)
def _no_fair_env(monkeypatch):
    """Keep the caller's FAIR_* variables out of these tests."""
    import os
    for name in list(os.environ):
        if name.startswith("FAIR_"):
            monkeypatch.delenv(name)


def test_plan_reports_watermark_48_and_task_budget_180(capsys):
    """The seed example: 8 engines, 20 s, 120 s -> watermark 48 and a 180 s task budget."""
    assert main(SEED) == 0
    out = capsys.readouterr().out
    assert re.search(r"watermark:\s+48 tasks", out)
    assert re.search(r"task budget:\s+180 s", out)
    assert re.search(r"worst-case task time:\s+170 s", out)
    assert re.search(r"fits task budget:\s+yes", out)


def test_plan_json(capsys):
    """--json prints the same plan as machine-readable JSON."""
    assert main(SEED + ["--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["watermark"] == 48 and plan["task_budget_s"] == 180.0
    assert plan["drain_rate_per_s"] == pytest.approx(0.4)
    assert plan["worst_case_task_s"] == pytest.approx(170.0)
    assert plan["inline_attempts"] == 5 and plan["fits"] is True
    assert (plan["lease_s"], plan["fits_lease"]) == (300.0, True)


def test_the_defaults_fit(capsys):
    """Out of the box plan --check passes: the defaults fit their own task budget and lease."""
    assert main(["plan", "--check"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"fits task budget:\s+yes", out)
    assert re.search(r"fits lease:\s+yes \(processing.lease_s 300 s\)", out)
    assert "!" not in out


def test_plan_check_fails_when_the_task_budget_is_exceeded(capsys):
    """Six attempts of 30 s overrun the 180 s budget: --check exits 1 and says how many fit."""
    assert main(SEED + ["--attempts", "6", "--check"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"fits task budget:\s+no", out) and "only 5 of 6 attempts fit" in out


def test_plan_check_fails_when_the_lease_is_shorter_than_the_worst_case(capsys):
    """A lease of 150 s under a 170 s worst case: --check exits 1 and the output says why."""
    assert main(SEED + ["--set", "processing.lease_s=150", "--check"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"fits lease:\s+no \(processing.lease_s 150 s\)", out)
    assert "! processing.lease_s 150s is shorter than the worst-case task time 170.0s" in out


def test_plan_fits_with_shorter_timeouts_and_checks_the_job_limit(capsys):
    """--set and --job-limit-seconds feed the fit check; --check exits 0 when it fits."""
    assert main(SEED + ["--set", "timeouts.ttfb_s=15", "--job-limit-seconds", "600",
                        "--tasks-per-job", "2", "--check", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits_task_budget"] and plan["fits_job_limit"] and plan["problems"] == []


def test_plan_check_fails_when_the_job_limit_is_too_short(capsys):
    """--check turns a configuration that does not fit into exit code 1."""
    assert main(SEED + ["--job-limit-seconds", "100", "--check"]) == 1
    assert "tm_ttc" in capsys.readouterr().out


def test_plan_reads_fair_environment_variables(capsys, monkeypatch):
    """FAIR_* variables set the defaults; explicit options win over them."""
    monkeypatch.setenv("FAIR_INTAKE_ENGINES", "4")
    monkeypatch.setenv("FAIR_INTAKE_MEAN_PROCESSING_S", "10")
    assert main(["plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["watermark"] == 48   # 4 x 120 / 10
    assert main(["plan", "--engines", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["watermark"] == 24


def test_plan_configured_watermark_wins(capsys):
    """A configured watermark is reported as such instead of the derived one."""
    assert main(SEED + ["--set", "intake.watermark=30", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["watermark"], plan["watermark_source"]) == (30, "configured")


@pytest.mark.parametrize("argv, fragment", [
    (["plan", "--engines", "0"], "intake.engines=0"),
    (["plan", "--set", "retry.jitter=wobbly"], "retry.jitter='wobbly'"),
    (["plan", "--set", "nonsense"], "expected NAME=VALUE"),
    (["plan", "--set", "intake.nonsense=1"], "is not a known setting"),
])
def test_plan_bad_configuration_exits_2_naming_it(capsys, argv, fragment):
    """A bad value is an error message naming the setting, exit code 2, no traceback."""
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_no_command_prints_help_and_exits_2(capsys):
    """Running without a command shows the usage on stderr."""
    assert main([]) == 2
    assert "plan" in capsys.readouterr().err


def test_version(capsys):
    """--version prints the package version."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_python_dash_m_runs_the_cli():
    """python -m fme_ai_resilience is the same command line."""
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience"] + SEED + ["--json"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["watermark"] == 48


def test_plan_sizes_a_burst_of_multi_photo_submissions(capsys):
    """--burst and --photos-per-submission: the burst's tasks, how many are parked past the
    watermark, that it fits the park ceiling, and how long the parked backlog takes to drain."""
    assert main(SEED + ["--burst", "300", "--photos-per-submission", "3"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"watermark:\s+48 tasks .*16 submissions of 3 photos", out)
    assert re.search(r"park ceiling:\s+100000 tasks .*33333 submissions", out)
    assert re.search(r"burst:\s+300 submissions x 3 photos = 900 tasks", out)
    assert re.search(r"parked:\s+852 tasks past the watermark, drained in 35 min 30 s", out)
    assert re.search(r"whole burst drained:\s+37 min 30 s", out)
    assert re.search(r"fits park ceiling:\s+yes", out)
    assert main(SEED + ["--burst", "300", "--photos-per-submission", "3", "--json"]) == 0
    burst = json.loads(capsys.readouterr().out)["burst"]
    assert burst == {"submissions": 300, "photos_per_submission": 3, "tasks": 900,
                     "parked": 852, "parked_drain_s": 2130.0, "drain_s": 2250.0,
                     "fits_park_ceiling": True, "refused_submissions": 0}


def test_plan_check_fails_when_a_burst_passes_the_park_ceiling(capsys):
    """A burst bigger than the park ceiling is a problem: --check exits 1 and says how many
    submissions would be refused."""
    assert main(SEED + ["--burst", "1000", "--photos-per-submission", "5", "--set",
                        "intake.park_ceiling=3000", "--set", "timeouts.ttfb_s=15", "--check"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"fits park ceiling:\s+no", out) and "400 submissions" in out


def test_the_plan_explains_the_adaptive_concurrency_and_the_slow_service_budget():
    """The defaults a GIS engineer never tunes, explained: calls in flight from the start to
    the ceiling, per engine, what a slow service's call may wait (what the task budget
    leaves) and the run of down failures that opens the circuit."""
    from fme_ai_resilience.cli.plan import build_plan, format_plan
    from fme_ai_resilience.core.config.settings import Settings

    plan = build_plan(Settings())
    assert plan["concurrency"] == {"start": 1, "ceiling": 32, "per_engine": 8,
                                   "engines_can_fill": 64, "ttfb_s_at_first": 20.0,
                                   "ttfb_s_at_most": 170.0, "consecutive_failures": 5}
    text = format_plan(plan)
    assert "at most 32 (concurrency.ceiling)" in text and "up to 170 s" in text
    slow = build_plan(Settings().with_values({"intake.latency_promise_s": "20"}))
    assert slow["concurrency"]["ttfb_s_at_most"] == 20.0     # never below the configured one
