"""``serve`` refuses at start a monitor token no request could ever present (blank, with
whitespace, non-ASCII, a control character): exit 2 and one line naming the variable, never
a gateway whose /metrics nobody can read."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.store import open_store

UNUSABLE = ["   ", "zq en", " zq81x", "zqéx-1234", "zq\x01en", "zq81y\t"]


@pytest.mark.parametrize("token", UNUSABLE, ids=["blank", "inner space", "leading space",
                                                  "non-ascii", "control", "tab"])
def test_serve_refuses_a_monitor_token_that_can_never_match(token, tmp_path):
    """Guarantee: ``serve --monitor-token-env VAR`` with an unusable token in VAR exits 2 at
    start with one line naming VAR and not showing the token, instead of serving."""
    db = f"sqlite:///{tmp_path / 'l.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    env["MONITOR_TOKEN"] = token
    try:
        done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "serve", "--db", db,
                               "--host", "127.0.0.1", "--port", "0",
                               "--monitor-token-env", "MONITOR_TOKEN"],
                              env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("serve started with a monitor token no request can present")
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert [line for line in err if "MONITOR_TOKEN" in line and "error" in line]
    assert "Traceback" not in done.stderr and (token.strip() or "   ") not in done.stderr


@pytest.mark.parametrize("token", UNUSABLE)
def test_make_app_refuses_a_monitor_token_that_can_never_match(token):
    """Guarantee: the gateway itself refuses such a monitor token (ConfigurationError), for
    callers that build it without ``serve``."""
    with open_store("sqlite:///:memory:", init_schema=True) as store:
        with pytest.raises(ValueError, match="monitor_token"):
            make_app(store=store, monitor_token=token)
