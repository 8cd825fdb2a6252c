"""``fme-ai-resilience workspaces build|check``: the committed .fmw files are exactly what the
generator writes from the .py scripts, and check passes them and the real saved files."""
from __future__ import annotations

import shutil

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.fme.parameters import WORKSPACES

from helpers.fmw_reference import require_reference
from helpers import REPO


ROOT = REPO
COMMITTED = ROOT / "workspaces"


V4 = "fme2023-2024"


@pytest.fixture
def scripts(tmp_path):
    """A directory holding copies of the template scripts of both shapes, nothing else."""
    (tmp_path / V4).mkdir()
    for name in WORKSPACES:
        shutil.copy(COMMITTED / f"{name}.py", tmp_path / f"{name}.py")
        shutil.copy(COMMITTED / V4 / f"{name}.py", tmp_path / V4 / f"{name}.py")
    return tmp_path


def test_build_writes_exactly_the_committed_files(scripts, capsys):
    """Building from the .py scripts gives the committed .fmw files of both shapes byte for
    byte, so the files cannot drift from their scripts."""
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    for name in WORKSPACES:
        for folder in ("", V4):
            assert (scripts / folder / f"{name}.fmw").read_bytes() == (
                COMMITTED / folder / f"{name}.fmw").read_bytes()
    assert capsys.readouterr().out.count(": written") == 6


def test_a_second_build_changes_nothing(scripts, capsys):
    """A rebuild with nothing changed leaves every file as it is, modification time included."""
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    stamps = {p: p.stat().st_mtime_ns for p in scripts.rglob("*.fmw")}
    capsys.readouterr()
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 0
    assert {p: p.stat().st_mtime_ns for p in scripts.rglob("*.fmw")} == stamps
    assert capsys.readouterr().out.count(": unchanged") == 6


def test_check_passes_the_committed_templates(capsys):
    """check with no FILE checks the templates of both shapes and prints no problem."""
    assert main(["workspaces", "check", "--dir", str(COMMITTED)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "6 file(s) checked, 0 with problems" in captured.err


@pytest.mark.parametrize("release", ["2023", "2024"])
def test_build_for_fme_2023_and_2024_writes_version_4_templates_check_passes(
        release, scripts, capsys):
    """--fme 2023 (or 2024) writes only the version-4 shape, into fme2023-2024/: a 2022.1.3
    save's build, PythonCaller 4 with one Output port, a Tester routing fme_rejection_code
    to Logger_2 and the rest to Logger, rejected features never ending the job; check passes
    them with their scripts and parameters."""
    assert main(["workspaces", "build", "--fme", release, "--dir", str(scripts)]) == 0
    assert list(scripts.glob("*.fmw")) == []
    for name in WORKSPACES:
        path = scripts / V4 / f"{name}.fmw"
        text = path.read_text(encoding="utf-8")
        assert 'FME_BUILD_NUM="22630"' in text and 'TERMINATE_REJECTED="NO"' in text
        assert '#!   TYPE="PythonCaller"\n#!   VERSION="4"' in text
        assert "&lt;Rejected&gt;" not in text.split("#! <TRANSFORMERS>")[1].split(
            'TYPE="Tester"')[0]
        assert 'TEST { fme_rejection_code ATTRIBUTE_HAS_A_VALUE "" ENCODED }' in text
        assert "PY_OUTPUT_TAGS" not in text and "PYTHON_NAMESPACE FMEOBJECTS" in text
    capsys.readouterr()
    assert main(["workspaces", "check", *map(str, (scripts / V4).glob("*.fmw"))]) == 0
    assert "3 file(s) checked, 0 with problems" in capsys.readouterr().err


def test_build_for_fme_2025_writes_only_the_version_6_shape(scripts, capsys):
    """--fme 2025 writes the three version-6 templates into --dir and nothing else."""
    assert main(["workspaces", "build", "--fme", "2025", "--dir", str(scripts)]) == 0
    assert sorted(p.name for p in scripts.glob("*.fmw")) == sorted(f"{n}.fmw"
                                                                   for n in WORKSPACES)
    assert list((scripts / V4).glob("*.fmw")) == []


@pytest.mark.parametrize("name", WORKSPACES)
def test_the_version_4_template_never_asks_for_an_output_tag(name, fair_db, fake_clock):
    """The FME 2023/2024 template's class, run as a version-4 PythonCaller (its only tag
    PYOUTPUT: an output_tag would be an FME error): a rejected feature leaves through Output
    with fme_rejection_code, the accepted ones too, nothing raises, no WARN about tags."""
    from fme_ai_resilience.testing import OUTPUT, run_caller
    from fme_ai_resilience.testing.templates import template_caller

    caller = template_caller(name, fme="2023")
    run = run_caller(caller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock, tags=(OUTPUT,))
    codes = [f.getAttribute("fme_rejection_code") for f in run.output]
    assert run.outputs.get("<Rejected>") is None and codes
    assert not [m for m in run.messages("WARN") if "output tag" in m or "<Rejected>" in m]


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
    (scripts / V4 / "WS-03_compensator.py").unlink()
    assert main(["workspaces", "build", "--dir", str(scripts)]) == 2
    assert f"{V4}/WS-03_compensator.py" in capsys.readouterr().err
    assert list(scripts.rglob("*.fmw")) == []


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
    from fme_ai_resilience.core.fme.parameters import parameters_for

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
