"""The workspace generator: FME's token encoding, and the 2025.0.3 shape of a rendered .fmw."""
from __future__ import annotations

import base64
import json
import re
import uuid
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.fme.fmw import (BUILD_NUMBER, COMMON_ATTRIBUTES, LAST_SAVE_BUILD,
                                            SECTIONS, WorkspaceSpec, document_guid,
                                            render_workspace)
from fme_ai_resilience.core.fme.fmw_encoding import decode_fme, encode_fme, xml_escape
from fme_ai_resilience.core.fme.parameters import PublishedParameter

from helpers.fmw_reference import python_sources, read, reference_files


SCRIPT = '''from fme_ai_resilience.fme import ProcessorCaller


class FeatureProcessor(ProcessorCaller):
    """Tasks in, {braces} [brackets] $(macro) a\\\\b 'q' & <tag> @at; 100% ~ok! Kråka."""
'''
DB = PublishedParameter("FAIR_DB", None, "Ledger database URL", secret=True, required=True)
TTFB = PublishedParameter("FAIR_TIMEOUTS_TTFB_S", "timeouts.ttfb_s", "Time to first byte, s",
                          default="15")


def spec(**changes):
    values = dict(name="WS-02_processor", script=SCRIPT, parameters=(DB, TTFB))
    values.update(changes)
    return WorkspaceSpec(**values)


def header(text):
    lines = text.split("\n")
    end = lines.index("#! </WORKSPACE>")
    return ET.fromstring("\n".join(line[3:] if line.startswith("#! ") else ""
                                   for line in lines[:end + 1]))


def mapping(text):
    return text.split("#! </WORKSPACE>\n", 1)[1].split("\n")


# --- the token encoding ----------------------------------------------------------------------

def test_encoding_uses_fme_tokens():
    """Reserved characters become tokens, non-ASCII <uXXXX> in lower-case hex, the rest stays."""
    assert encode_fme("a b\n'\"(),[]{}$/\\<>&;@") == (
        "a<space>b<lf><apos><quote><openparen><closeparen><comma><openbracket><closebracket>"
        "<opencurly><closecurly><dollar><solidus><backslash><lt><gt><amp><semicolon><at>")
    assert encode_fme("Kråka # % * + - . : = ? _ ~") == (
        "Kr<u00e5>ka<space>#<space>%<space>*<space>+<space>-<space>.<space>:<space>=<space>?"
        "<space>_<space>~")


def test_encoding_matches_what_fme_wrote_for_the_creator_geometry():
    """The Creator's null geometry encodes to the very string the 2025.0.3 sample holds."""
    xml = ('<?xml version="1.0" encoding="US_ASCII" standalone="no" ?>'
           '<geometry><null/></geometry>')
    assert encode_fme(xml) == (
        "<lt>?xml<space>version=<quote>1.0<quote><space>encoding=<quote>US_ASCII<quote><space>"
        "standalone=<quote>no<quote><space>?<gt><lt>geometry<gt><lt>null<solidus><gt><lt>"
        "<solidus>geometry<gt>")


@pytest.mark.parametrize("char", ["\t", "\r", "`", "\x00", "\U0001f600"])
def test_encoding_refuses_characters_no_saved_file_shows(char):
    """A tab, CR, backtick, control or astral character is refused, not guessed."""
    with pytest.raises(ConfigurationError, match="no FME encoding"):
        encode_fme(f"a{char}b")


@pytest.mark.parametrize("bad", ["<nosuchtoken>", "a<b", "a>b", "<u12>"])
def test_decoding_refuses_what_fme_never_writes(bad):
    """An unknown token or a bare angle bracket is an error, not text."""
    with pytest.raises(ConfigurationError):
        decode_fme(bad)


_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"),
                              blacklist_characters="`", max_codepoint=0xFFFF)
                | st.sampled_from(["\n", " "]), max_size=200)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_decoding_inverts_encoding(text):
    """Every text the encoder takes comes back unchanged, and the encoding has no bare < >."""
    encoded = encode_fme(text)
    assert decode_fme(encoded) == text
    assert re.sub(r"<[a-z0-9]+>", "", encoded).count("<") == 0


def test_every_real_script_round_trips():
    """Decoding each saved PythonCaller script and encoding it again gives FME's bytes back."""
    scripts = [s for path in reference_files() for s in python_sources(read(path))]
    if not scripts:
        pytest.skip("no reference workspaces on this machine")
    for encoded in scripts:
        assert encode_fme(decode_fme(encoded)) == encoded


def test_document_guid_is_uuid5_of_the_name():
    """The GUID is uuid5(NAMESPACE_URL, name), lower case: the same name, the same GUID."""
    for name in ("WS-01_intake", "x", "Kråka"):
        assert document_guid(name) == str(uuid.uuid5(uuid.NAMESPACE_URL, name))


# --- the specification -----------------------------------------------------------------------

@pytest.mark.parametrize("changes, field", [
    ({"name": "bad name"}, "name"),
    ({"script": "class FeatureProcessor(:\n"}, "script"),
    ({"script": "class Other:\n    pass\n"}, "script"),
    ({"script": "class FeatureProcessor:\n\tpass\n"}, "script"),
    ({"parameters": (DB, DB)}, "parameters"),
    ({"symbol": "no-symbol"}, "symbol"),
])
def test_spec_refuses_what_fme_could_not_run(changes, field):
    """A script that does not compile, lacks its class or holds a tab, or a doubled parameter,
    is refused before any file is written."""
    with pytest.raises(ConfigurationError) as info:
        spec(**changes)
    assert info.value.field == field


def test_spec_names_the_line_of_an_unencodable_character():
    """The error says which line of the script holds the character FME cannot carry."""
    with pytest.raises(ConfigurationError, match="line 3"):
        spec(script="class FeatureProcessor:\n    pass\n# `code`\n")


# --- the rendered file -----------------------------------------------------------------------

def test_rendering_is_deterministic_and_text_only():
    """The same spec renders to the same UTF-8, LF-only text ending in a newline."""
    first, second = render_workspace(spec()), render_workspace(spec())
    assert first == second
    assert "\r" not in first and first.endswith("\n")
    first.encode("utf-8")


def test_document_guids_follow_the_workspace_name():
    """Each workspace gets its own GUID, derived from its name, so a rebuild gives no diff."""
    a, b = header(render_workspace(spec())), header(render_workspace(spec(name="WS-03_x")))
    assert a.get("FME_DOCUMENT_GUID") == document_guid(
        "fme-ai-resilience:workspace:WS-02_processor")
    assert a.get("FME_DOCUMENT_GUID") != b.get("FME_DOCUMENT_GUID")
    assert re.fullmatch(r"[0-9a-f-]{36}", a.get("FME_DOCUMENT_PRIORGUID"))


def test_header_has_the_common_attributes_in_order_and_the_sixteen_sections():
    """Line 1 and 2 are fixed, the 48 common attributes are there, one per line and
    alphabetical, and the sixteen sections follow in order."""
    text = render_workspace(spec())
    lines = text.split("\n")
    assert lines[:2] == ['#! <?xml version="1.0" encoding="UTF-8" ?>', "#! <WORKSPACE"]
    names = [m.group(1) for m in (re.match(r"#!   ([A-Z0-9_]+)=", line)
                                  for line in lines[:lines.index("#! >")]) if m]
    assert names == sorted(names)
    assert set(COMMON_ATTRIBUTES) <= set(names)
    assert set(names) - set(COMMON_ATTRIBUTES) == {"FME_BULK_MODE_THRESHOLD"}
    root = header(text)
    assert [c.tag for c in root] == list(SECTIONS)
    assert root.get("LAST_SAVE_BUILD") == LAST_SAVE_BUILD
    assert root.get("FME_BUILD_NUM") == BUILD_NUMBER == "25241"
    assert root.get("PYTHON_COMPATIBILITY") == "39"
    assert 'LAST_SAVE_BUILD "FME 2025.0.3.0 (20250602 - Build 25241 - WIN64)"' in mapping(text)
    assert "FME_PYTHON_VERSION 39" in mapping(text)


def test_both_script_copies_decode_to_the_script():
    """The header's PYTHONSOURCE (XML-escaped) and the mapping's SOURCE_CODE are one encoding
    of the script, and decode to it exactly."""
    text = render_workspace(spec())
    caller = next(t for t in header(text).find("TRANSFORMERS") if t.get("TYPE") == "PythonCaller")
    parms = {p.get("PARM_NAME"): p.get("PARM_VALUE") for p in caller.findall("XFORM_PARM")}
    assert caller.get("VERSION") == "6"
    assert parms["PYTHONSYMBOL"] == "FeatureProcessor"
    assert decode_fme(parms["PYTHONSOURCE"]) == SCRIPT
    assert f'PARM_VALUE="{xml_escape(encode_fme(SCRIPT))}"' in text
    factory = [line for line in mapping(text) if " PythonFactory " in line]
    assert len(factory) == 1
    assert f"SOURCE_CODE {{ {encode_fme(SCRIPT)} }}" in factory[0]


def test_python_caller_block_is_the_v6_shape():
    """FME_PYTHON_PATH right before the PythonFactory, output tags, both ports as feature
    types, and no @Abort anywhere: <Rejected> is connected to its own Logger."""
    body = mapping(render_workspace(spec()))
    at = next(i for i, line in enumerate(body) if " PythonFactory " in line)
    assert body[at - 1] == 'FME_PYTHON_PATH "$(FME_MF_DIR)"'
    line = body[at]
    assert "INPUT  FEATURE_TYPE Creator_CREATED" in line
    assert "PY_OUTPUT_TAGS { PYOUTPUT <Rejected> }" in line
    assert "OUTPUT { PYOUTPUT FEATURE_TYPE PythonCaller_OUTPUT         }" in line
    assert "OUTPUT { <Rejected> FEATURE_TYPE PythonCaller_<Rejected>         }" in line
    assert not any("@Abort" in b or "_WB_BYPASS_TERMINATION" in b for b in body)
    assert any("INPUT  FEATURE_TYPE PythonCaller_<Rejected>" in b and "ERROR" in b for b in body)
    assert any("INPUT  FEATURE_TYPE PythonCaller_OUTPUT" in b and "INFO" in b for b in body)


def test_graph_links_creator_caller_and_both_loggers():
    """Four transformers, three links with unique IDENTIFIERs; <Rejected> is linked as
    'fo 1 <lt>Rejected<gt>', and TERMINATE_REJECTED is NO as a second guard."""
    root = header(render_workspace(spec()))
    nodes = {t.get("IDENTIFIER"): t.get("TYPE") for t in root.find("TRANSFORMERS")}
    links = [(link.get("SOURCE_NODE"), link.get("SOURCE_PORT_DESC"), link.get("TARGET_NODE"),
              link.get("TARGET_PORT_DESC")) for link in root.find("FEAT_LINKS")]
    assert sorted(nodes.values()) == ["Creator", "Logger", "Logger", "PythonCaller"]
    ids = list(nodes) + [link.get("IDENTIFIER") for link in root.find("FEAT_LINKS")]
    assert len(ids) == len(set(ids))
    by_type = {v: k for k, v in nodes.items() if v != "Logger"}
    assert (by_type["Creator"], "fo 0 CREATED", by_type["PythonCaller"], "fi 0 ") in links
    assert [l for l in links if l[1] == "fo 1 <lt>Rejected<gt>"][0][0] == by_type["PythonCaller"]
    assert root.get("TERMINATE_REJECTED") == "NO"


def test_published_parameters_appear_in_every_place_fme_keeps_them():
    """Each parameter is in FORM (2025.0 key order), PARAMETER_INFO, GLOBAL_PARAMETERS, a
    DEFAULT_MACRO and the command-line note; only the required one gets a value check; the
    secret one (the ledger URL) is FME's password type, written as real 2025.1.1 saves write
    one (PASSWORD_ENCODED) with only the keys Safe's own password fields carry."""
    text = render_workspace(spec())
    root = header(text)
    form = json.loads(base64.b64decode(root.find("USER_PARAMETERS").get("FORM")))
    assert form["parameters"][0] == {
        "name": "FAIR_DB", "prompt": "Ledger database URL", "valueType": "string",
        "defaultValue": "", "supportedValueTypes": ["expression", "globalParameter"],
        "deprecatedFlags": ["none"], "type": "password"}
    assert list(form["parameters"][1]) == [
        "name", "prompt", "valueType", "required", "defaultValue", "supportedValueTypes",
        "deprecatedFlags", "type", "editor", "showEditButton"]
    assert form["parameters"][1]["required"] is False
    info = {i.get("NAME"): i.attrib for i in root.find("USER_PARAMETERS/PARAMETER_INFO")}
    assert info["FAIR_TIMEOUTS_TTFB_S"] == {
        "NAME": "FAIR_TIMEOUTS_TTFB_S", "DEFAULT_VALUE": "15", "SCOPE": "STAND_ALONE",
        "GENERATED_GUI_LINE": "false",
        "GUI_LINE": "GUI OPTIONAL TEXT FAIR_TIMEOUTS_TTFB_S Time to first byte, s"}
    assert info["FAIR_DB"]["GUI_LINE"] == "GUI PASSWORD_ENCODED FAIR_DB Ledger database URL"
    assert [g.get("DEFAULT_VALUE") for g in root.find("GLOBAL_PARAMETERS")] == ["", "15"]
    body = mapping(text)
    assert "DEFAULT_MACRO FAIR_DB " in body and "DEFAULT_MACRO FAIR_TIMEOUTS_TTFB_S 15" in body
    checks = [b for b in body if b.startswith("INCLUDE [ if {{$(")]
    assert checks == ["INCLUDE [ if {{$(FAIR_DB$encode)} == {}} { puts_real {Parameter "
                      "'FAIR_DB' must be given a value.}; exit 1; }; ]"]
    assert '#          --FAIR_TIMEOUTS_TTFB_S "15"' in text.split("\n")


def test_workspace_without_parameters_has_an_empty_form():
    """No parameters: FORM is the empty form FME writes, and no DEFAULT_MACRO block."""
    text = render_workspace(spec(parameters=()))
    assert header(text).find("USER_PARAMETERS").get("FORM") == "eyJwYXJhbWV0ZXJzIjpbXX0="
    assert not any(line.startswith("# ====") for line in mapping(text))


def test_render_refuses_anything_but_a_spec():
    """render_workspace takes a WorkspaceSpec, nothing looser."""
    with pytest.raises(ConfigurationError):
        render_workspace({"name": "x"})


def test_exposed_attributes_are_on_both_caller_ports_and_in_attributes_to_expose():
    """The spec's attributes appear on the PythonCaller's OUTPUT and <Rejected> ports and in
    its NEW_ATTRIBUTES ("Attributes to Expose"); a bad or repeated name is refused."""
    root = header(render_workspace(spec(attributes=("fair_kind", "fair_status"))))
    caller = next(t for t in root.find("TRANSFORMERS") if t.get("TYPE") == "PythonCaller")
    ports: dict = {}
    for attr in caller.findall("XFORM_ATTR"):
        ports.setdefault(attr.get("FEAT_INDEX"), []).append(attr.get("ATTR_NAME"))
    assert {"fair_kind", "fair_status"} <= set(ports["0"]) and {
        "fair_kind", "fair_status", "fme_rejection_code"} <= set(ports["1"])
    parms = {p.get("PARM_NAME"): p.get("PARM_VALUE") for p in caller.findall("XFORM_PARM")}
    assert parms["NEW_ATTRIBUTES"] == "fair_kind buffer fair_status buffer"
    for bad in (("fair kind",), ("fair_kind", "fair_kind")):
        with pytest.raises(ConfigurationError):
            spec(attributes=bad)
