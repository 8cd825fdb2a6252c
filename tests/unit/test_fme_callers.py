"""What the three PythonCaller classes share: the class interface FME expects, configuration
errors rejected naming the published parameter, a ledger out of reach, FME releases without
output tags or real nulls, logs without FME, and no secret anywhere."""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from fme_ai_resilience.fme import CompensatorCaller, IntakeCaller, ProcessorCaller
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import FakeFeature, Fault, run_caller

from helpers.fme_fixtures import (VISION_KEY, assert_no_secret, body, intake_macros,
                                processor_macros, texts)
from helpers import REPO


CALLERS = (IntakeCaller, ProcessorCaller, CompensatorCaller)
VISION = "https://vision.test/analyze"


def test_importing_the_callers_needs_neither_fme_nor_fmeobjects():
    """With both modules made unimportable, the callers import (and import neither)."""
    code = ("import sys\n"
            "sys.modules['fme'] = None\nsys.modules['fmeobjects'] = None\n"
            "import fme_ai_resilience.fme as m\n"
            "print(m.ProcessorCaller.__name__, sys.modules['fme'], sys.modules['fmeobjects'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ProcessorCaller", "None", "None"]


@pytest.mark.parametrize("caller", CALLERS)
def test_each_caller_has_the_pythoncaller_interface_and_declines_bulk_mode(caller):
    """No-argument constructor, input/close/process_group, has_support_for False for any
    support type (Bulk Mode's feature-table shim included); close without input is fine."""
    instance = caller()
    assert all(callable(getattr(instance, m)) for m in ("input", "close", "process_group"))
    assert instance.has_support_for(1) is False and instance.has_support_for(None) is False
    instance.process_group()
    instance.close()
    assert "ledger=closed" in repr(instance)


@pytest.mark.parametrize("macros, parameter, text", [
    ({"FAIR_DB": None}, "FAIR_DB", "FAIR_DB='': the ledger URL is required"),
    ({"FAIR_DB": "mysql://u:ledger-pw-31@h/db"}, "FAIR_DB", "unsupported scheme 'mysql'"),
    ({"FAIR_DB": "sqlite:////nonexistent/dir/l.db"}, "FAIR_DB", "no ledger file there"),
    ({"FAIR_RETRY_TASK_ATTEMPTS": "x"}, "FAIR_RETRY_TASK_ATTEMPTS",
     "FAIR_RETRY_TASK_ATTEMPTS='x': must be a whole number"),
    ({"FAIR_RETRY_TASK_ATTEMPT": "5"}, "FAIR_RETRY_TASK_ATTEMPT",
     "did you mean FAIR_RETRY_TASK_ATTEMPTS?"),
    ({"FAIR_BREAKER_FAILURE_RATE": "1.5"}, "FAIR_BREAKER_FAILURE_RATE", "must be > 0 and <= 1"),
    ({"FAIR_VALIDATION_THRESHOLDS": "hydrant=2"}, "FAIR_VALIDATION_THRESHOLDS",
     "must be between 0 and 1"),
    ({"FAIR_VISION_KY": VISION_KEY}, "FAIR_VISION_KY", "'[REDACTED]': is not a known setting"),
    ({"FAIR_ARCGIS_CLIENT_SECRET": "s3cret-value-x"}, "FAIR_ARCGIS_CLIENT_ID",
     "client_id and client_secret go together"),
])
@pytest.mark.parametrize("caller", CALLERS)
def test_a_bad_configuration_is_rejected_naming_the_parameter(caller, macros, parameter, text,
                                                             fair_db, fake_clock):
    """Every input feature leaves through <Rejected> with CONFIGURATION and a message naming
    the published parameter (a secret's value never shown); one ERROR line each."""
    given = {k: v for k, v in {"FAIR_DB": fair_db, "FAIR_VISION_ENDPOINT": VISION,
                               **macros}.items() if v is not None}
    run = run_caller(caller, [{"message": body()}, {"message": body()}], given,
                     clock=fake_clock)
    assert run.output == [] and len(run.rejected) == 2
    for out in run.rejected:
        values = out.as_dict()
        assert (values["fair_kind"], values["fair_parameter"], values["fme_rejection_code"]) \
            == ("configuration", parameter, "CONFIGURATION")
        assert values["fme_rejection_message"] == values["fair_reason"]
        assert values["fair_reason"].startswith(f"{parameter}=") and text in values["fair_reason"]
    assert [line.severity for line in run.log] == ["ERROR", "ERROR"]
    assert_no_secret(texts(run.rejected), run.messages())
    assert not any("s3cret-value-x" in t for t in texts(run.rejected) + run.messages())


def test_the_processor_without_a_vision_endpoint_is_refused(fair_db, fake_clock):
    """WS-02 with no FAIR_VISION_ENDPOINT: rejected naming it; WS-01 and WS-03 need none."""
    run = run_caller(ProcessorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    (out,) = run.rejected
    assert out.getAttribute("fair_parameter") == "FAIR_VISION_ENDPOINT"
    assert run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock) \
        .rejected == []


def test_an_empty_sqlite_ledger_gets_its_schema_on_first_open(tmp_path, fake_clock):
    """An empty SQLite file (the embedded default, as a new engine host has it) gets the
    schema when the caller first opens it, as every command's ledger does: nothing rejected."""
    path = tmp_path / "empty.db"
    path.write_bytes(b"")   # what SQLite makes of a new file: a database with no table
    run = run_caller(CompensatorCaller, [{}], {"FAIR_DB": f"sqlite:///{path}"},
                     clock=fake_clock)
    assert run.rejected == [] and run.output
    with open_store(f"sqlite:///{path}") as store:
        assert store.schema_version() == store.latest_schema_version("sqlite")


def test_a_bad_row_of_the_config_table_says_where_it_is(fair_db, fake_clock):
    """A resilience_config row that cannot work is refused naming its parameter and the
    table, so nobody hunts for it among the published parameters."""
    with open_store(fair_db) as store:
        store.set_config({"retry.task_attempts": "0"}, now=fake_clock.now())
    run = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    (out,) = run.rejected
    assert out.getAttribute("fair_parameter") == "FAIR_RETRY_TASK_ATTEMPTS"
    assert "resilience_config" in out.getAttribute("fair_reason")


def test_an_unreachable_ledger_is_retryable_never_rejected(fake_clock):
    """PostgreSQL refusing connections: WS-01 answers 503 with Retry-After through Output,
    WS-02 emits nothing, WS-03 a FAILED report; ERROR lines without the password."""
    macros = {"FAIR_DB": "postgresql://fair:ledger-pw-31@127.0.0.1:1/ledger",
              "FAIR_VISION_ENDPOINT": VISION}
    intake = run_caller(IntakeCaller, [{"message": body()}], macros, clock=fake_clock)
    assert intake.rejected == []
    (out,) = intake.output
    assert (out.getAttribute("fair_http_status"), out.getAttribute("fair_retry_after_s"),
            out.getAttribute("fair_answer"), out.isAttributeNull("fair_status")) == (
        503, 20, "unavailable", True)
    processor = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert processor.output == processor.rejected == []
    assert processor.log[0].severity == "ERROR" and "unavailable" in processor.log[0].message
    compensator = run_caller(CompensatorCaller, [{}], macros, clock=fake_clock)
    assert [f.getAttribute("fair_status") for f in compensator.output] == ["FAILED"]
    for run in (intake, processor, compensator):
        assert_no_secret(texts(run.output), run.messages())
        assert all("ledger-pw-31" not in m for m in run.messages())


def test_without_output_tags_a_rejection_leaves_through_output_with_its_code(fake_clock):
    """FME before 2024.0 (pyoutput takes no output tag): the rejected feature comes out of
    Output, still carrying fme_rejection_code; one WARN says so, once."""
    run = run_caller(ProcessorCaller, [{}, {}], {}, clock=fake_clock, output_tags=False)
    assert run.outputs.get("<Rejected>") is None
    assert [f.getAttribute("fme_rejection_code") for f in run.output] == ["CONFIGURATION"] * 2
    assert run.rejected == run.output and run.accepted == []
    assert [line.severity for line in run.log] == ["ERROR", "WARN", "ERROR"]


def test_on_a_build_without_real_nulls_attributes_that_do_not_apply_are_missing(
        fair_db, fake_clock, fake_fme, monkeypatch):
    """An FMEFeature without setAttributeNullWithType: a non-applicable attribute is left
    missing (getAttribute None), never set to an empty string."""
    class OldFeature(FakeFeature):
        setAttributeNullWithType = None

    monkeypatch.setattr(sys.modules["fmeobjects"], "FMEFeature", OldFeature)
    run = run_caller(IntakeCaller, [{"message": body()}], intake_macros(fair_db),
                     clock=fake_clock)
    (out,) = run.output
    assert isinstance(out, OldFeature)
    assert out.isAttributeMissing("fair_outcome") and out.getAttribute("fair_outcome") is None
    assert out.getAttribute("fair_status") == "PENDING"


def test_without_fme_the_callers_log_through_python_logging(fair_db, caplog):
    """No fme and no fmeobjects at all: no published parameters (so FAIR_DB is missing), the
    rejection is a feature of the input's own class, the line goes to Python logging."""
    assert "fmeobjects" not in sys.modules and "fme" not in sys.modules
    caller = ProcessorCaller()
    sent = []
    caller.pyoutput = lambda feature, output_tag="PYOUTPUT": sent.append((output_tag, feature))
    with caplog.at_level(logging.INFO, logger="fme_ai_resilience.fme"):
        caller.input(FakeFeature())
    caller.close()
    ((tag, out),) = sent
    assert tag == "<Rejected>" and isinstance(out, FakeFeature)
    assert out.getAttribute("fair_parameter") == "FAIR_DB"
    assert [(r.levelname, r.name) for r in caplog.records] == [("ERROR",
                                                               "fme_ai_resilience.fme")]


def test_no_secret_reaches_an_attribute_a_log_line_or_a_repr(fair_db, fake_clock, fake_vision):
    """The Vision AI answering 401 with the key echoed back, an ArcGIS token, the portal
    token of the body: none of them in any feature, line or repr of the three callers."""
    import responses
    from helpers.fme_fixtures import JPEG, PHOTO

    fake_vision.mock.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    fake_vision.then = Fault(401, body=json.dumps({"error": {
        "message": f"Access denied: key {VISION_KEY} is not valid"}}))
    macros = processor_macros(fair_db, fake_vision.endpoint)
    runs = [run_caller(IntakeCaller, [{"message": body()}], macros, clock=fake_clock),
            run_caller(ProcessorCaller, [{}], macros, clock=fake_clock),
            run_caller(CompensatorCaller, [{}], macros, clock=fake_clock)]
    assert [f.getAttribute("fme_rejection_code") for f in runs[1].rejected] == ["AUTH"]
    for run in runs:
        assert_no_secret(texts(run.output + run.rejected), run.messages(),
                         [repr(run.caller)])
    assert VISION_KEY not in repr(runs[1].caller._processor)


def test_the_fme_flow_page_documents_every_output_attribute_where_it_appears():
    """docs/fme-flow.md's fair_* table has one row per attribute, naming exactly the kinds of
    feature that carry it (``task (collect)``: the collected conclusion's)."""
    import re

    from fme_ai_resilience.fme import ATTRIBUTES, CONCLUSION_ATTRIBUTES

    page = (REPO / "docs" / "fme-flow.md").read_text(
        encoding="utf-8")
    rows = {m.group(1): {k.strip() for k in m.group(2).split(",")}
            for m in re.finditer(r"^\| `(fair_[a-z_]+)` \| ([^|]+) \|", page, re.M)}
    expected = {}
    for kind, names in ATTRIBUTES.items():
        for name in names:
            expected.setdefault(name, set()).add(kind)
    for name in CONCLUSION_ATTRIBUTES:
        expected.setdefault(name, set()).add("task (collect)")
    assert rows == expected


def test_password_parameters_that_arrive_encrypted_are_decrypted_through_fme(
        fair_db, fake_clock, fake_vision):
    """The ledger URL and the Vision key reach Python as ``fme_decrypt(...)`` (a password
    typed into Workbench and saved): FME's @Concatenate decrypts them, the task succeeds, the
    Vision AI gets the plain key, and neither the plain nor the encrypted value shows."""
    import responses
    from fme_ai_resilience.testing import fme_encrypt
    from helpers.fme_fixtures import JPEG, PHOTO

    fake_vision.mock.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    plain = processor_macros(fair_db, fake_vision.endpoint)
    macros = {**plain, "FAIR_DB": fme_encrypt(fair_db),
              "FAIR_VISION_KEY": fme_encrypt(VISION_KEY)}
    intake = run_caller(IntakeCaller, [{"message": body()}], macros, clock=fake_clock)
    assert intake.rejected == [] and intake.output[0].getAttribute("fair_status") == "PENDING"
    run = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert run.rejected == []
    assert [f.getAttribute("fair_status") for f in run.output] == ["SUCCEEDED"]
    sent = [c.request for c in fake_vision.mock.calls if c.request.method == "POST"]
    assert len(sent) == 1 and VISION_KEY in str(sent[0].headers)
    for shown in (texts(run.output), run.messages(), [repr(run.caller)]):
        assert not [t for t in shown if "fme_decrypt" in t or VISION_KEY in t]


@pytest.mark.parametrize("caller", CALLERS)
def test_an_encrypted_value_fme_cannot_decrypt_is_refused_naming_its_parameter(
        caller, fair_db, fake_clock):
    """A value that reads fme_decrypt(...) but is no cipher this FME made: every feature is
    rejected with CONFIGURATION naming FAIR_VISION_KEY, the value never shown."""
    macros = {"FAIR_DB": fair_db, "FAIR_VISION_ENDPOINT": VISION,
              "FAIR_VISION_KEY": "fme_decrypt(bm90LWEtY2lwaGVy)"}
    run = run_caller(caller, [{"message": body()}], macros, clock=fake_clock)
    (out,) = run.rejected
    assert (out.getAttribute("fair_parameter"), out.getAttribute("fme_rejection_code")) == (
        "FAIR_VISION_KEY", "CONFIGURATION")
    assert "could not decrypt" in out.getAttribute("fair_reason")
    assert not [t for t in texts(run.rejected) + run.messages() if "bm90LWEtY2lwaGVy" in t]


def test_the_first_feature_says_what_runs_and_warns_once_without_fmes_session(
        fair_db, fake_clock):
    """One INFORM line at the first feature only: the library's version and folder, Python,
    requests and urllib3 and the HTTP session; inside an FME where fmetools cannot be
    imported WS-03 adds one WARN (not one per feature) that FME's proxy settings are not
    followed; with fmetools the line names FMERequestsSession and there is no WARN."""
    import platform

    import requests
    import urllib3

    import fme_ai_resilience
    from fme_ai_resilience.testing import installed_fmetools

    run = run_caller(CompensatorCaller, [{}, {}], {"FAIR_DB": fair_db}, clock=fake_clock)
    first = run.messages()[0]
    assert first.startswith(f"fme-ai-resilience WS-03_compensator: fme-ai-resilience "
                            f"{fme_ai_resilience.__version__} (")
    for part in (f"Python {platform.python_version()}", f"requests {requests.__version__}",
                 f"urllib3 {urllib3.__version__}", "HTTP through the library's session"):
        assert part in first
    assert sum("fme-ai-resilience " + fme_ai_resilience.__version__ in m
               for m in run.messages()) == 1
    warned = [m for m in run.messages("WARN") if "FME's network session cannot be made" in m]
    assert len(warned) == 1 and "fmetools is not installed" in warned[0]
    with installed_fmetools():
        inside = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    assert "HTTP through FME's FMERequestsSession" in inside.messages()[0]
    assert not [m for m in inside.messages("WARN") if "network session" in m]
    intake = run_caller(IntakeCaller, [{"message": body()}], {"FAIR_DB": fair_db},
                        clock=fake_clock)
    assert "HTTP" not in intake.messages()[0] and intake.messages("WARN") == []


@pytest.mark.parametrize("caller", CALLERS)
def test_a_deployment_parameter_fme_flow_did_not_resolve_is_refused_naming_it(caller,
                                                                              fake_clock):
    """FAIR_DB given as "$(fair_db)" (the reference flow deploy writes, left unresolved): the
    feature is rejected with CONFIGURATION naming FAIR_DB and the deployment parameter."""
    run = run_caller(caller, [{"message": body()}], {"FAIR_DB": "$(fair_db)"},
                     clock=fake_clock)
    (out,) = run.rejected
    assert out.getAttribute("fair_parameter") == "FAIR_DB"
    assert "create the deployment parameter fair_db" in out.getAttribute("fair_reason")


def test_every_feature_the_callers_make_has_a_geometry_set(fair_db, fake_clock):
    """Output and rejected features of all three callers get a (null) geometry, as Safe's
    fmetools builds features, never an undefined one."""
    runs = [run_caller(IntakeCaller, [{"message": body()}, {"message": "{"}],
                       {"FAIR_DB": fair_db}, clock=fake_clock),
            run_caller(ProcessorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock),
            run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)]
    made = [f for run in runs for f in run.output + run.rejected]
    assert len(made) >= 4 and all(f.geometry_set and f.getGeometry() is None for f in made)


def test_the_processor_exposes_the_collected_conclusions_fields():
    """The ai_* fields a collected conclusion fills (the writeback.*_field defaults) are
    among the attributes WS-02's template and FairProcessor expose on their ports."""
    from fme_ai_resilience.fme.caller_base import WORKSPACE_ATTRIBUTES
    from fme_ai_resilience.core.fme.parameters import PROCESSOR
    from fme_ai_resilience.core.config.settings import Settings

    w = Settings().writeback
    fields = {w.condition_field, w.confidence_field, w.outcome_field, w.model_field,
              w.trace_field, w.assessed_at_field, w.parent_field, w.photo_field}
    assert fields <= set(WORKSPACE_ATTRIBUTES[PROCESSOR])


def test_only_the_librarys_own_parameters_are_decrypted(fair_db, fake_clock):
    """An encrypted value of a parameter the library does not read (another password of the
    workspace) is left alone: nothing is rejected for it."""
    run = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db,
                                               "POSTGIS_PASSWORD": "fme_decrypt(bm9wZQ==)"},
                     clock=fake_clock)
    assert run.rejected == [] and [f.getAttribute("fair_status") for f in run.output] == [
        "DONE"]
