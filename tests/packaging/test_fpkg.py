"""The FME Package's content as the core makes it: package.yml, the transformers' forms,
ports and templates, the icon, and the checks that keep compiled code out."""
from __future__ import annotations

import json
import re
import struct
import zlib

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.fme import fpkg, fpkg_help
from fme_ai_resilience.core.fme.fmxj import fmxj
from fme_ai_resilience.fme.caller_base import WORKSPACE_ATTRIBUTES
from fme_ai_resilience.core.fme.parameters import parameters_for

from helpers import REPO


ROOT = REPO
DATA = ROOT / "tests" / "data"


def test_package_yml_lists_the_transformers_and_the_wheels_in_order():
    """The manifest names the package, the three transformers at version 1 and each wheel."""
    text = fpkg.package_yml("1.2.3", ["fme_ai_resilience", "jsonschema"])
    assert "uid: fme-ai-resilience\npublisher_uid: fair\n" in text
    # FME Flow parses a Python transformer's parameters from build 24145 (Safe's template)
    assert "version: 1.2.3\nminimum_fme_build: 24145\n" in text
    for t in fpkg.TRANSFORMERS:
        assert f"    - name: {t.name}\n      version: 1\n" in text
    assert text.endswith("  python_packages:\n    - name: fme_ai_resilience\n"
                         "    - name: jsonschema\n")
    with pytest.raises(ConfigurationError):
        fpkg.package_yml("1.2", [])


@pytest.mark.parametrize("transformer", fpkg.TRANSFORMERS, ids=lambda t: t.name)
def test_each_transformer_has_its_workspace_form_ports_and_class(transformer):
    """The form holds the workspace's published parameters as ___XF_ parameters; both ports
    list every fair_* attribute; the template runs the class and routes <Rejected>."""
    attributes = WORKSPACE_ATTRIBUTES[transformer.workspace]
    definition = fmxj(transformer, attributes)
    (version,) = definition["versions"]
    assert definition["info"]["name"] == f"fair.fme-ai-resilience.{transformer.name}"
    params = {p["name"]: p for p in version["form"]["parameters"][1]["parameters"]}
    assert list(params) == [fpkg.PARAMETER_PREFIX + p.name
                            for p in parameters_for(transformer.workspace)]
    output, rejected = version["outputPorts"]
    assert [a["name"] for a in output["attributesAdded"]] == list(attributes)
    assert rejected["name"] == "<Rejected>" and [a["name"] for a in rejected[
        "attributesAdded"]][-2:] == ["fme_rejection_code", "fme_rejection_message"]
    assert f"    SYMBOL_NAME {transformer.symbol}" in version["executionTemplate"]
    assert "    OUTPUT { FAILED FEATURE_TYPE $(OUTPUT_<Rejected>_FTYPE)" in version[
        "executionTemplate"]


def _keys_by_context(definition):
    """Every key of an .fmxj document, by where it sits (the contexts of the facts file)."""
    found = {}

    def add(context, mapping):
        found.setdefault(context, set()).update(mapping)

    def parameter(p):
        add("parameter", p)
        if "choiceSettings" in p:
            add("choiceSettings", p["choiceSettings"])
            for choice in p["choiceSettings"].get("choices", []):
                add("choice", choice)
        if "urlSettings" in p:
            add("urlSettings", p["urlSettings"])
        for q in p.get("parameters", []):
            parameter(q)

    add("fmxj", definition)
    add("info", definition["info"])
    for version in definition["versions"]:
        add("version", version)
        add("form", version["form"])
        for p in version["form"]["parameters"]:
            parameter(p)
        for port in version["inputPorts"]:
            add("inputPort", port)
        for port in version["outputPorts"]:
            add("outputPort", port)
            for attribute in port["attributesAdded"]:
                add("attribute", attribute)
    return found


def _parameters(definition):
    def walk(ps):
        for p in ps:
            yield p
            yield from walk(p.get("parameters", []))
    return list(walk(definition["versions"][0]["form"]["parameters"]))


@pytest.mark.parametrize("transformer", fpkg.TRANSFORMERS, ids=lambda t: t.name)
def test_every_key_and_kind_of_the_forms_is_one_safes_own_transformers_use(transformer):
    """Each key of the .fmxj, at each level, and each type, valueType, choice set and editor
    appears in Safe's own definitions (HTTPCaller, the packaged-transformer template, the
    packager's fixtures; tests/data/safe_fmxj_keys.json, vendored as facts)."""
    facts = json.loads((DATA / "safe_fmxj_keys.json").read_text(encoding="utf-8"))
    definition = fmxj(transformer, WORKSPACE_ATTRIBUTES[transformer.workspace])
    for context, keys in _keys_by_context(definition).items():
        assert keys <= set(facts["keys"][context]), (context, keys - set(facts["keys"][context]))
    for p in _parameters(definition):
        assert p["type"] in facts["values"]["type"]
        assert p["valueType"] in facts["values"]["valueType"]
        assert p.get("editor", "plaintext") in facts["values"]["editor"]
        if "choiceSettings" in p:
            assert p["choiceSettings"]["choiceSet"] in facts["values"]["choiceSet"]


def test_each_parameter_takes_the_form_safe_gives_its_kind():
    """URLs are stringEncoded URL fields, JSON documents stringEncoded text (the webhook body
    is no password), numbers are numbers with bounds, choices dropdowns, the web connection
    the webConnections choice set, secrets password fields."""
    form = {p["name"][len(fpkg.PARAMETER_PREFIX):]: p for t in fpkg.TRANSFORMERS
            for p in _parameters(fmxj(t, ())) if p["name"].startswith(fpkg.PARAMETER_PREFIX)}
    endpoint = form["FAIR_VISION_ENDPOINT"]
    assert (endpoint["type"], endpoint["valueType"], endpoint["editor"]) == (
        "text", "stringEncoded", "url")
    body = form["FAIR_WEBHOOK_BODY"]
    assert (body["type"], body["valueType"]) == ("text", "stringEncoded")
    assert form["FAIR_DOWNLOAD_HOST_HEADERS"]["type"] == "password"
    assert form["FAIR_DOWNLOAD_HOST_HEADERS"]["valueType"] == "stringEncoded"
    assert form["FAIR_VISION_KEY"]["type"] == "password"
    assert form["FAIR_DB"]["type"] == "password" and "required" not in form["FAIR_DB"]
    attempts = form["FAIR_RETRY_TASK_ATTEMPTS"]
    assert (attempts["type"], attempts["minimum"], attempts["multipleOf"]) == ("number", 0, 1)
    rate = form["FAIR_BREAKER_FAILURE_RATE"]
    assert (rate["type"], rate["minimum"], rate["maximum"]) == ("number", 0, 1)
    assert "multipleOf" not in form["FAIR_TIMEOUTS_TTFB_S"]
    sink = form["FAIR_WRITEBACK_SINK"]
    assert sink["type"] == "dropdown" and [c["value"] for c in sink["choiceSettings"][
        "choices"]] == ["feature_layer", "table", "collect"]
    assert [c["value"] for c in form["FAIR_INTAKE_OVERLOAD_MODE"]["choiceSettings"][
        "choices"]] == ["park", "reject"]
    assert [c["value"] for c in form["FAIR_COMPENSATION_RECONCILE_BACKFILL"][
        "choiceSettings"]["choices"]] == ["true", "false"]
    connection = form["FAIR_ARCGIS_WEB_CONNECTION"]
    assert (connection["type"], connection["choiceSettings"]) == (
        "dropdown", {"choiceSet": "webConnections"})
    optional = [p for name, p in form.items() if name != "FAIR_DB"]
    assert all(p["required"] is False and p["defaultValue"] == "" for p in optional)


def test_the_pins_cover_every_shipped_and_vendored_distribution_and_leave_waitress_out():
    """fpkg-constraints.txt pins one version of each third-party distribution the package
    ships or vendors (the requirements and fmetools among them); waitress, which never runs
    inside FME, is not there; a loose line is refused."""
    text = (ROOT / fpkg.CONSTRAINTS_FILE).read_text(encoding="utf-8")
    pins = fpkg.pinned_versions(text)
    assert {"jsonschema", "pg8000", "fmetools", "attrs", "pyrsistent", "scramp",
            "python-dateutil", "six"} <= set(pins)
    assert pins["jsonschema"] == "4.17.3" and "waitress" not in pins
    assert set(fpkg.PURE_REQUIREMENTS) | set(fpkg.VENDORED) <= set(pins)
    assert not set(pins) & set(fpkg.LEFT_TO_FME)
    with pytest.raises(ConfigurationError, match="must pin one version"):
        fpkg.pinned_versions("pg8000>=1.29\n")


def test_the_help_says_how_to_wire_rejected_and_lives_in_help():
    """The full page (help/, F1) and the Quick Add text both say to connect <Rejected>, the
    page how to avoid the abort otherwise and where the sample is; the Quick Add text has no
    heading (Workbench adds one); the page and the README say to restart after an upgrade
    and the README lists the pinned versions."""
    for t in fpkg.TRANSFORMERS:
        page = fpkg_help.transformer_help(t, WORKSPACE_ATTRIBUTES[t.workspace])
        assert page.startswith(f"# {t.name} (fair.fme-ai-resilience)\n")
        assert "Continue Translation" in page and fpkg_help.SAMPLE_WORKSPACE in page
        assert "Connect `<Rejected>`" in page
        quick = fpkg_help.quick_add(t)
        assert not quick.startswith("#") and "<Rejected>" in quick
        assert "restart" in page.lower()
    readme = fpkg.readme("1.2.3", {"jsonschema": "4.17.3", "fmetools": "0.14.2"})
    assert "restart FME Form" in readme and "jsonschema 4.17.3" in readme


def test_the_sample_workspace_connects_both_ports_of_the_three_transformers():
    """The sample passes every workspace rule; it holds FairIntake, FairProcessor and
    FairCompensator, each fed by a Creator, with Output and <Rejected> both linked, and
    under Workbench's default (TERMINATE_REJECTED YES) it would still never abort."""
    from fme_ai_resilience.core.fme.fmw_check import check_workspace
    from fme_ai_resilience.core.fme.fmw_sample import render_sample, transformers_in

    text = render_sample(WORKSPACE_ATTRIBUTES)
    assert check_workspace(text) == []
    assert transformers_in(text) == [f"fair.fme-ai-resilience.{t.name}"
                                     for t in fpkg.TRANSFORMERS]
    strict = text.replace('TERMINATE_REJECTED="NO"', 'TERMINATE_REJECTED="YES"')
    assert strict != text and check_workspace(strict) == []
    cut = re.sub(r'#! <FEAT_LINK\n#!   IDENTIFIER="8"\n(?:#!   .*\n)*?#! />\n', "", strict)
    assert [p.rule for p in check_workspace(cut)] == ["rejected"]
    assert render_sample(WORKSPACE_ATTRIBUTES) == text


def test_the_icon_is_a_square_png_of_at_least_200_pixels():
    """A PNG whose header says 256 x 256, RGB, with intact chunks."""
    data = fpkg.icon_png()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    width, height = struct.unpack(">II", data[16:24])
    assert (kind, width, height) == (b"IHDR", 256, 256)
    assert struct.unpack(">I", data[16 + length:20 + length])[0] == zlib.crc32(
        data[12:16 + length]) & 0xFFFFFFFF
    with pytest.raises(ConfigurationError):
        fpkg.icon_png(100)


def test_bytecode_in_a_wheel_counts_as_compiled():
    """A .pyc (bytecode of one interpreter version) is compiled code too: no member of the
    package may be one."""
    assert fpkg.compiled_files(["a/__pycache__/x.cpython-311.pyc", "b/y.pyo", "c/z.py"]) == [
        "a/__pycache__/x.cpython-311.pyc", "b/y.pyo"]


def test_compiled_members_and_platform_wheels_are_found():
    """A .so, .pyd or .dll member is compiled; only a none-any wheel is pure."""
    assert fpkg.compiled_files(["a/x.py", "a/_speed.cpython-39-x86_64-linux-gnu.so",
                                "b/y.PYD"]) == ["a/_speed.cpython-39-x86_64-linux-gnu.so",
                                                "b/y.PYD"]
    assert fpkg.is_pure_wheel("attrs-26.1.0-py3-none-any.whl")
    assert not fpkg.is_pure_wheel("rpds_py-0.20.0-cp39-cp39-manylinux_2_17_x86_64.whl")
    assert fpkg.wheel_distribution("python_dateutil-3.0.0-py2.py3-none-any.whl") == \
        "python_dateutil"


@pytest.mark.parametrize("name", ["ProcessorTransformer", "CompensatorTransformer"])
def test_a_transformer_without_a_ledger_says_so_through_its_one_port(name):
    """No ___XF_FAIR_DB: the feature leaves through the Python port with the CONFIGURATION
    code naming FAIR_DB (the template routes it to <Rejected>), nothing else."""
    from fme_ai_resilience.fme import transformers
    from fme_ai_resilience.testing import run_caller

    run = run_caller(getattr(transformers, name), [{"___XF_FAIR_DB": "  "}], {})
    assert run.rejected == []
    (out,) = run.output
    assert out.getAttribute("fme_rejection_code") == "CONFIGURATION"
    assert "FAIR_DB" in out.getAttribute("fme_rejection_message")


class _FMETransformer:
    """fmeobjects.FMETransformer as FME 2023+ has it: the transformer's definition reads the
    serialized values of its parameters (here: FME's encoding of ``/`` and ``@``)."""

    loaded: list = []

    def __init__(self, name, package, version):
        type(self).loaded.append((name, package, version))
        self.values = {}

    def setParameterValue(self, name, value):
        self.values[name] = value
        return True

    def getParsedParamValue(self, name):
        value = self.values[name]
        return value.replace("<solidus>", "/").replace("<at>", "@") if value else None


def test_a_transformer_reads_its_parameters_through_fme_s_own_parser(tmp_path):
    """FME puts a transformer's parameters on the feature serialized (a path's ``/`` as
    ``<solidus>``): the class asks FME's FMETransformer for each parsed value, so an encoded
    ledger URL opens the ledger (the next refusal is about the Vision endpoint)."""
    import sys

    from fme_ai_resilience.fme import transformers
    from fme_ai_resilience.store import open_store
    from fme_ai_resilience.testing import installed_fme, run_caller

    ledger = tmp_path / "ledger.db"
    open_store(f"sqlite:///{ledger}", init_schema=True).close()
    encoded = "sqlite:" + f"///{ledger}".replace("/", "<solidus>")
    _FMETransformer.loaded = []
    with installed_fme():
        sys.modules["fmeobjects"].FMETransformer = _FMETransformer
        run = run_caller(transformers.ProcessorTransformer,
                         [{"___XF_FAIR_DB": encoded, "___XF_FAIR_VISION_ENDPOINT": ""}], {})
    (out,) = run.output
    assert out.getAttribute("fair_parameter") == "FAIR_VISION_ENDPOINT"
    assert _FMETransformer.loaded[0][:2] == ("fair.fme-ai-resilience.FairProcessor",
                                             "fair.fme-ai-resilience")


def test_before_fme_2023_b23224_text_values_are_decoded_and_passwords_kept():
    """No FMETransformer: text parameters go through FMESession's decoding, passwords as
    given; outside FME (no fmeobjects) nothing is read at all."""
    from fme_ai_resilience.fme.transformers import fme_parser, transformer_parameters
    from fme_ai_resilience.testing import FakeFeature, installed_fme
    import sys

    class Session:
        def decodeFromFMEParsableText(self, value):
            return value.replace("<solidus>", "/")

    assert fme_parser("fair.fme-ai-resilience.FairProcessor", "WS-02_processor") is None
    with installed_fme():
        sys.modules["fmeobjects"].FMESession = Session
        parse = fme_parser("fair.fme-ai-resilience.FairProcessor", "WS-02_processor")
        feature = FakeFeature({"___XF_FAIR_VISION_ENDPOINT": "https:<solidus><solidus>v.test",
                               "___XF_FAIR_VISION_KEY": "k<solidus>1",
                               "___XF_FAIR_VISION_MODEL": "FME_NULL_VALUE"})
        assert transformer_parameters(feature, parse) == {
            "FAIR_VISION_ENDPOINT": "https://v.test", "FAIR_VISION_KEY": "k<solidus>1"}


def test_a_packaged_transformers_encrypted_password_is_decrypted(tmp_path):
    """___XF_FAIR_DB arriving encrypted (fme_decrypt(...)) on the feature: FME decrypts it,
    the ledger opens, and the next refusal is about the Vision endpoint, not the ledger."""
    from fme_ai_resilience.fme import transformers
    from fme_ai_resilience.store import open_store
    from fme_ai_resilience.testing import fme_encrypt, run_caller

    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_store(ledger, init_schema=True).close()
    run = run_caller(transformers.ProcessorTransformer,
                     [{"___XF_FAIR_DB": fme_encrypt(ledger), "___XF_FAIR_VISION_ENDPOINT": ""}],
                     {})
    (out,) = run.output
    assert out.getAttribute("fair_parameter") == "FAIR_VISION_ENDPOINT"
    assert not [m for m in run.messages() if "fme_decrypt" in m]
