"""The systemd units' commands, run as systemd runs them: the example production configuration
and secrets in the environment, ``db upgrade`` first, then the service, stopped by SIGTERM,
which must end it with exit 0 well within the unit's TimeoutStopSec.

Every URL of the example configuration is pointed at a closed loopback port (nothing leaves
the machine); the ledger is a SQLite file in the test's directory, the port 0.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

from helpers.deploy_recipes import (COMMAND, CONFIG, INSTALLED, commands, env_file, one,
                                    unit_path)

CLOSED = "http://127.0.0.1:9"
#: The example configuration's URLs, on loopback.
LOOPBACK = {
    "FAIR_INTAKE_FEATURE_SERVICES": f"{CLOSED}/arcgis/rest/services/inspection/FeatureServer",
    "FAIR_WRITEBACK_LAYER_URL": f"{CLOSED}/arcgis/rest/services/inspection/FeatureServer/0",
    "FAIR_VISION_ENDPOINT": f"{CLOSED}/vision",
    "FAIR_ARCGIS_PORTAL_URL": CLOSED,
}
#: Long enough for a start on a busy machine; only a hang reaches it.
START_S = 60


def _environment(tmp_path, **extra):
    """The variables systemd would set from production.env and a filled-in secrets.env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIR_", "PG"))}
    env.update(env_file(CONFIG / "production.env"))
    env.update({name: "placeholder-secret-value"
                for name in env_file(CONFIG / "secrets.env.example")})
    env.pop("FAIR_DOWNLOAD_HOST_HEADERS")
    env.update(LOOPBACK, FAIR_DB_URL=f"sqlite:///{tmp_path / 'ledger.db'}", **extra)
    return env


def _argv(line):
    return [COMMAND, *line]


def _start(name, env, tmp_path):
    """Run the unit's ExecStartPre (db upgrade) to completion, then start its ExecStart."""
    *before, main_line = commands(unit_path(name))
    for line in before:
        done = subprocess.run(_argv(line), env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=START_S)
        assert done.returncode == 0, done.stderr
        assert "the latest of fme-ai-resilience" in done.stdout
    if name == "serve":
        main_line = [("0" if prev == "--port" else arg)
                     for prev, arg in zip([""] + main_line, main_line)]
    return subprocess.Popen(_argv(main_line), env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _stop(name, proc):
    """SIGTERM, as systemd's KillSignal=; the exit code and the output."""
    limit = int(one(unit_path(name), "Service", "TimeoutStopSec"))
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=min(limit, START_S))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{name} still running {min(limit, START_S)} s after SIGTERM: {err}")
    return proc.returncode, out, err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is how systemd stops a unit")
def test_serve_unit_answers_health_and_stops_on_sigterm(tmp_path):
    """serve's unit command with the example configuration: /healthz answers 200, the monitor
    token in the environment opens its detail, SIGTERM ends it with exit 0."""
    proc = _start("serve", _environment(tmp_path), tmp_path)
    try:
        first = proc.stdout.readline()
        address = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert address, (first, proc.stderr.read() if proc.poll() is not None else "")
        request = urllib.request.Request(
            address.group(0) + "/healthz",
            headers={"Authorization": "Bearer placeholder-secret-value"})
        with urllib.request.urlopen(request, timeout=START_S) as response:
            assert response.status == 200
    finally:
        code, _, err = _stop("serve", proc)
    assert code == 0, err
    assert "placeholder-secret-value" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is how systemd stops a unit")
@pytest.mark.parametrize("name", ["process", "compensate"])
def test_loop_units_run_and_stop_on_sigterm(tmp_path, name):
    """process --loop and compensate --loop with the example configuration: each runs its first
    batch or pass on an empty ledger and ends with exit 0 on SIGTERM, while it waits."""
    # The compensator's reconciliation would ask the (closed) portal for a token: nothing to
    # reconcile against here, so the layers are left out for it.
    extra = {} if name == "process" else {"FAIR_WRITEBACK_LAYER_URL": "",
                                          "FAIR_INTAKE_FEATURE_SERVICES": ""}
    proc = _start(name, _environment(tmp_path, **extra), tmp_path)
    first = proc.stdout.readline()   # the first batch's or pass's report: it is waiting now
    assert first.strip(), proc.stderr.read() if proc.poll() is not None else ""
    code, _, err = _stop(name, proc)
    assert code == 0, err
    assert "placeholder-secret-value" not in err
    assert INSTALLED not in err
