"""The README's two set-up commands are the ones CI runs."""
from __future__ import annotations

import re

from helpers import REPO


ROOT = REPO


def _readme_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text.split("## Set up", 1)[1]
    return re.findall(r"```sh\n(.+?)\n```", setup, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    """A newcomer needs one line to install and run the main job, one to run the tests."""
    commands = _readme_commands()
    assert len(commands) == 2
    assert "pip install" in commands[0] and "fme-ai-resilience" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_commands_verbatim():
    """.ci/run executes both README lines exactly as written."""
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in _readme_commands():
        assert command in ci_lines, f"{command!r} is not a line of .ci/run"
