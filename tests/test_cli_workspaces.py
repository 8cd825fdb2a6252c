"""``fme-ai-resilience workspaces build|check``: the committed .fmw files are exactly what the
generator writes from the .py scripts, and check passes them and the real saved files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.fme.parameters import WORKSPACES

from tests.fmw_reference import require_reference

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "workspaces"


@pytest.fixture
def scripts(tmp_path):
    """A directory holding copies of the three template scripts, and nothing else."""
    for name in WORKSPACES:
        shutil.copy(COMMITTED / f"{name}.py", tmp_path / f"{name}.py")
    return tmp_path


def test_build_writes_exactly_the_committed_files(scripts, capsys):
    """Building from the .py scripts gives the committed .fmw files byte for byte, so the
    files cannot drift from their scripts."""
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    for name in WORKSPACES:
        assert (scripts / f"{name}.fmw").read_bytes() == (COMMITTED / f"{name}.fmw").read_bytes()
    assert capsys.readouterr().out.count(": written") == 3


def test_a_second_build_changes_nothing(scripts, capsys):
    """A rebuild with nothing changed leaves every file as it is, modification time included."""
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    stamps = {p: p.stat().st_mtime_ns for p in scripts.glob("*.fmw")}
    capsys.readouterr()
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    assert {p: p.stat().st_mtime_ns for p in scripts.glob("*.fmw")} == stamps
    assert capsys.readouterr().out.count(": unchanged") == 3


def test_check_passes_the_committed_templates(capsys):
    """check with no FILE checks the three templates in --dir and prints no problem."""
    assert main(["workspaces", "check", "--dir", str(COMMITTED)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "3 file(s) checked, 0 with problems" in captured.err


def test_check_reports_the_real_files_with_the_abort_trap(capsys):
    """On the real saved workspaces, check exits 1 with one line per unconnected <Rejected>
    FME compiled an @Abort for: the PythonCaller of fgp_SupprimerMetaJsonLocal_2025.0.3.fmw
    among them, and nothing but that rule."""
    files = require_reference()
    assert main(["workspaces", "check", *map(str, files)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(": rejected: " in line for line in lines)
    fgp = str(files[0].parent / "fgp_SupprimerMetaJsonLocal_2025.0.3.fmw")
    assert f"{fgp}: rejected: PythonCaller PythonCaller's <Rejected> is not connected" in \
        "\n".join(lines)


def test_a_template_edited_by_hand_is_reported(scripts, capsys):
    """A .fmw whose script no longer matches its .py is reported (expected-script), and one
    that passes every rule but differs from the build is reported stale."""
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    script = scripts / "WS-02_processor.py"
    script.write_text(script.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    fmw = scripts / "WS-03_compensator.fmw"
    fmw.write_text(fmw.read_text(encoding="utf-8").replace('ZOOM_SCALE="100"',
                                                          'ZOOM_SCALE="75"'), encoding="utf-8")
    capsys.readouterr()
    assert main(["workspaces", "check", "--dir", str(scripts)]) == 1
    out = capsys.readouterr().out
    assert "WS-02_processor.fmw: expected-script: " in out
    assert "WS-03_compensator.fmw: stale: " in out
    assert "WS-01_intake.fmw" not in out


def test_a_file_that_is_not_utf8_is_a_problem(tmp_path, capsys):
    """Bytes that are not UTF-8 are reported as a problem of the file (exit 1)."""
    bad = tmp_path / "bad.fmw"
    bad.write_bytes(b"#! <?xml version=\"1.0\" ?>\n\xff\xfe")
    assert main(["workspaces", "check", str(bad)]) == 1
    assert "bad.fmw: text: is not UTF-8" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["workspaces", "check", "no-such-file.fmw"],
    ["workspaces", "check", "--dir", "no-such-dir"],
    ["workspaces", "build", "--dir", "no-such-dir"],
])
def test_usage_errors_exit_2(argv, capsys):
    """A missing file or directory is a usage error: exit 2, one line on stderr."""
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_build_needs_all_three_scripts(scripts, capsys):
    """A directory lacking a template script is a usage error, and nothing is written."""
    (scripts / "WS-03_compensator.py").unlink()
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 2
    assert "WS-03_compensator.py" in capsys.readouterr().err
    assert list(scripts.glob("*.fmw")) == []


def test_a_script_fme_could_not_run_writes_nothing(scripts, capsys):
    """A script with a syntax error fails the build (exit 2) before any .fmw is written."""
    (scripts / "WS-01_intake.py").write_text("class FeatureProcessor(:\n", encoding="utf-8")
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 2
    assert "does not compile" in capsys.readouterr().err
    assert list(scripts.glob("*.fmw")) == []


@pytest.mark.parametrize("name", WORKSPACES)
def test_the_shipped_templates_expose_every_fair_attribute_and_no_secret_as_text(name):
    """Each template's PythonCaller shows every fair_* attribute its caller sets on both
    ports, every secret published parameter is FME's password type, and the template asks
    for the lowest interpreter the library supports (3.9)."""
    import base64
    import json
    import xml.etree.ElementTree as ET

    from fme_ai_resilience.fme.caller_base import WORKSPACE_ATTRIBUTES
    from fme_ai_resilience.fme.parameters import parameters_for

    text = (ROOT / "workspaces" / f"{name}.fmw").read_text(encoding="utf-8")
    head = "\n".join(line[3:] for line in text.split("\n#! </WORKSPACE>")[0].split("\n")
                     if line.startswith("#! ")) + "\n</WORKSPACE>"
    root = ET.fromstring(head.replace("<?xml version=\"1.0\" encoding=\"UTF-8\" ?>", ""))
    caller = next(t for t in root.find("TRANSFORMERS") if t.get("TYPE") == "PythonCaller")
    for port in ("0", "1"):
        shown = {a.get("ATTR_NAME") for a in caller.findall("XFORM_ATTR")
                 if a.get("FEAT_INDEX") == port}
        assert set(WORKSPACE_ATTRIBUTES[name]) <= shown
    form = json.loads(base64.b64decode(root.find("USER_PARAMETERS").get("FORM")))
    kinds = {p["name"]: p["type"] for p in form["parameters"]}
    secrets = [p.name for p in parameters_for(name) if p.secret]
    assert secrets and all(kinds[s] == "password" for s in secrets)
    assert all(kinds[p.name] == "text" for p in parameters_for(name) if not p.secret)
    assert root.get("PYTHON_COMPATIBILITY") == "39"
