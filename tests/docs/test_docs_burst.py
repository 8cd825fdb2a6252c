"""The burst in docs/intake.md ("Try a burst"), run as written: every delivery stored."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path


from helpers import REPO


DOC = REPO / "docs" / "intake.md"


def _snippet() -> str:
    section = DOC.read_text(encoding="utf-8").split("### Try a burst", 1)[1]
    return re.search(r"```sh\n(.+?)\n```", section, flags=re.S).group(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_documented_burst_against_serve_stores_every_delivery(tmp_path):
    """300 three-photo surveys at once against `serve` with the default settings: 300 answers
    202 and 900 photos in the ledger (48 PENDING, 852 DEFERRED), as the page says."""
    script = _snippet().replace("8080", str(_free_port()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "answers: {202: 300}" in out, out[-3000:] + done.stderr[-3000:]
    assert re.search(r"^  PENDING\s+48$", out, re.M)
    assert re.search(r"^  DEFERRED\s+852$", out, re.M)
    assert re.search(r"^  total\s+900 ", out, re.M)
    assert re.search(r"^  refusals not recorded\s+0 ", out, re.M)
    assert "stopped; every request in progress was answered" in done.stderr
