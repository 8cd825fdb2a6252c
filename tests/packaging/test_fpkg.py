"""The FME Package's content as the core makes it: package.yml, the transformers' forms,
ports and templates, the icon, and the checks that keep compiled code out."""
from __future__ import annotations

import struct
import zlib

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.fme import fpkg
from fme_ai_resilience.fme.caller_base import WORKSPACE_ATTRIBUTES
from fme_ai_resilience.core.fme.parameters import parameters_for


def test_package_yml_lists_the_transformers_and_the_wheels_in_order():
    """The manifest names the package, the three transformers at version 1 and each wheel."""
    text = fpkg.package_yml("1.2.3", ["fme_ai_resilience", "jsonschema"])
    assert "uid: fme-ai-resilience\npublisher_uid: fair\n" in text
    assert "version: 1.2.3\nminimum_fme_build: 23146\n" in text
    for t in fpkg.TRANSFORMERS:
        assert f"    - name: {t.name}\n      version: 1\n" in text
    assert text.endswith("  python_packages:\n    - name: fme_ai_resilience\n"
                         "    - name: jsonschema\n")
    with pytest.raises(ConfigurationError):
        fpkg.package_yml("1.2", [])


@pytest.mark.parametrize("transformer", fpkg.TRANSFORMERS, ids=lambda t: t.name)
def test_each_transformer_has_its_workspace_form_ports_and_class(transformer):
    """The form holds the workspace's published parameters as ___XF_ parameters, secrets as
    password fields; both ports list every fair_* attribute; the template runs the class."""
    attributes = WORKSPACE_ATTRIBUTES[transformer.workspace]
    definition = fpkg.fmxj(transformer, attributes)
    (version,) = definition["versions"]
    assert definition["info"]["name"] == f"fair.fme-ai-resilience.{transformer.name}"
    params = {p["name"]: p for p in version["form"]["parameters"][1]["parameters"]}
    for p in parameters_for(transformer.workspace):
        entry = params[fpkg.PARAMETER_PREFIX + p.name]
        assert entry["type"] == ("password" if p.secret else "text")
    output, rejected = version["outputPorts"]
    assert [a["name"] for a in output["attributesAdded"]] == list(attributes)
    assert rejected["name"] == "<REJECTED>" and [a["name"] for a in rejected[
        "attributesAdded"]][-2:] == ["fme_rejection_code", "fme_rejection_message"]
    assert f"    SYMBOL_NAME {transformer.symbol}" in version["executionTemplate"]


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
