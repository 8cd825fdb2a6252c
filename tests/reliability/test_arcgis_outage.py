"""A feature layer (or its portal) that does not answer fails a pass's reconciliation, never the
``compensate --loop`` that runs it: the loop logs the failure and reconciles again at its next
pass, as WS-03's caller reports FAILED and goes on."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

#: A loopback port nothing listens on (the discard port): every ArcGIS call is refused.
CLOSED = "http://127.0.0.1:9"


@pytest.mark.skipif(sys.platform == "win32", reason="the loop is stopped by SIGTERM")
def test_compensate_loop_outlives_a_layer_that_does_not_answer(tmp_path):
    """Guarantee: with the layer to reconcile against refusing every connection,
    ``compensate --loop`` logs the reconciliation failed at each pass, keeps running (no
    traceback), and exits 0 on SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    env.update(FAIR_WRITEBACK_LAYER_URL=f"{CLOSED}/arcgis/rest/services/x/FeatureServer/0",
               FAIR_DOWNLOAD_ALLOW_PRIVATE_HOSTS="127.0.0.1")
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    subprocess.run([sys.executable, "-m", "fme_ai_resilience", "db", "init", "--db", db],
                   env=env, check=True, capture_output=True, timeout=60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fme_ai_resilience", "compensate", "--loop", "--interval",
         "0.2", "--db", db], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    failures, lines = 0, []
    try:
        deadline = time.monotonic() + 60
        while failures < 2 and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            failures += "reconciliation failed" in line
        assert failures >= 2, "".join(lines)
        assert proc.poll() is None, "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, "".join(lines) + err
    assert "Traceback" not in "".join(lines) + err
