"""The workspace checker: it passes what FME really writes, in every release's shape, and each
rule reports the defect planted for it."""
from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.fme.fmw import WorkspaceSpec, render_workspace
from fme_ai_resilience.core.fme.fmw_check import RULES, Problem, check_workspace
from fme_ai_resilience.core.fme.parameters import PublishedParameter


#: The real files that break a rule as Workbench's default has them: a transformer's
#: unconnected <Rejected> under TERMINATE_REJECTED="YES" (fmw-format.md section 3.6).

from helpers.fmw_reference import read, reference_files, require_reference


TRIPS_REJECTED = {"fgp_SupprimerMetaJsonLocal_2025.0.3.fmw",
                  "kix_copyZfromLocalhost2uuc-srv_new1LABBA_2022.1.3.fmw",
                  "speckle_ReadSpeckleJSON_2021.2.fmw"}

SCRIPT = ("from fme_ai_resilience.fme import IntakeCaller\n\n\n"
          "class FeatureProcessor(IntakeCaller):\n    \"\"\"Kråka (1, 2) {x}.\"\"\"\n")
DB = PublishedParameter("FAIR_DB", None, "Ledger database URL", secret=True, required=True)
ENGINES = PublishedParameter("FAIR_INTAKE_ENGINES", "intake.engines", "Engines", default="8")


def generated():
    return render_workspace(WorkspaceSpec("WS-01_intake", SCRIPT, (DB, ENGINES)))


def rules(problems):
    return sorted({p.rule for p in problems})


def unlink_rejected(text):
    """``text`` without the link from <Rejected> to its Logger (IDENTIFIER 8)."""
    cut = re.sub(r'#! <FEAT_LINK\n#!   IDENTIFIER="8"\n(?:#!   .*\n)*?#! />\n', "", text)
    assert cut != text
    return cut


def plant(text, old, new, count=1):
    """``text`` with ``old`` replaced ``count`` times; fails when ``old`` is not there."""
    assert text.count(old) >= count, f"{old!r} is not in the text"
    return text.replace(old, new, count)


# --- real files ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", reference_files(), ids=lambda p: p.name)
def test_real_workspaces_pass_every_rule_but_the_rejected_trap(path):
    """Each real PythonCaller workspace (2021.2 to 2025.2, PythonCaller v4, v6 and v7) passes
    every rule; only the file that leaves <Rejected> unconnected under YES trips that rule."""
    problems = check_workspace(read(path))
    expected = ["rejected"] if path.name in TRIPS_REJECTED else []
    assert rules(problems) == expected, [str(p) for p in problems]


def test_the_rejected_rule_names_exactly_the_transformers_fme_compiled_an_abort_for():
    """In every real file the rule reports exactly the transformers (a PythonCaller, a
    FeatureReader, a JSONFragmenter ...) whose <Rejected> FME compiled into an @Abort
    factory in the mapping: none missed, none invented (a transformer nothing flows into
    gets no factory at all)."""
    files = require_reference()
    for path in files:
        text = read(path)
        aborting = set(re.findall(r"FACTORY_NAME (\S+)_<Rejected> INPUT FEATURE_TYPE \S+ .*"
                                  r"@Abort\(", text))
        reported = {re.search(r" (\S+)'s <", q.message).group(1)
                    for q in check_workspace(text) if q.rule == "rejected"}
        assert reported == aborting, path.name
    tripped = {p.name for p in files if any(q.rule == "rejected"
                                            for q in check_workspace(read(p)))}
    assert tripped == TRIPS_REJECTED


def test_the_real_files_cover_every_release_shape():
    """The samples the checker passes hold PythonCaller v4, v6 and v7 and builds from 2021.2
    to 2025.2, so the rules are proved on every shape FME really writes."""
    texts = [read(p) for p in require_reference()]
    versions = set()
    for text in texts:
        versions |= set(re.findall(r'TYPE="PythonCaller"\n#!   VERSION="(\d+)"', text))
    builds = {re.search(r'LAST_SAVE_BUILD="FME\(R\) (\d{4}\.\d)', t).group(1) for t in texts}
    assert {"4", "6", "7"} <= versions
    assert {"2021.2", "2022.1", "2025.0", "2025.1", "2025.2"} <= builds


def test_a_real_script_copy_changed_in_one_place_is_reported():
    """On a 2021.2 v4 file, a SOURCE_CODE that no longer matches its PYTHONSOURCE is caught."""
    path = next((p for p in require_reference() if "2021.2" in p.name), None)
    if path is None:
        pytest.skip("no 2021.2 sample")
    text = read(path)
    source = re.search(r"SOURCE_CODE \{ (\S+) \}", text).group(1)
    broken = plant(text, f"SOURCE_CODE {{ {source} }}",
                   f"SOURCE_CODE {{ {source}<lf>pass<lf> }}")
    assert rules(check_workspace(broken)) == sorted({"script", *rules(check_workspace(text))})


def test_a_real_link_to_a_missing_port_is_reported():
    """On a 2025.2 v7 file, a link naming a port its transformer does not have is caught."""
    path = next((p for p in require_reference() if "2025.2" in p.name), None)
    if path is None:
        pytest.skip("no 2025.2 sample")
    broken = plant(read(path), 'SOURCE_PORT_DESC="fo 0 OUTPUT"',
                   'SOURCE_PORT_DESC="fo 3 OUTPUT"')
    assert rules(check_workspace(broken)) == ["links"]


# --- the generated file ----------------------------------------------------------------------

def test_a_generated_workspace_passes_with_its_script_and_parameters():
    """The generator's output passes every rule, the expected script and parameters too."""
    assert check_workspace(generated(), expected_script=SCRIPT,
                           expected_parameters={"FAIR_DB": "", "FAIR_INTAKE_ENGINES": "8"}) == []


GUID = 'FME_DOCUMENT_GUID="'
PLANTED = [
    ("text", lambda t: t.replace("\n", "\r\n", 3)),
    ("header", lambda t: plant(t, '#! <?xml version="1.0" encoding="UTF-8" ?>', "#! <?xml?>")),
    ("header", lambda t: plant(t, "#! </WORKSPACE>", "#! </WORKSPAC>")),
    ("header", lambda t: plant(t, "#! </FEAT_LINKS>", "#! </FEAT_LINK>")),
    ("header", lambda t: plant(t, "#! <DATASETS>\n", "#! <DATASETS>\nnot a comment\n")),
    ("attributes", lambda t: re.sub(r'#!   HISTORY=""\n', "", t)),
    ("attributes", lambda t: plant(t, '#!   ZOOM_SCALE="100"\n', "").replace(
        "#!   ARCGIS", '#!   ZOOM_SCALE="100"\n#!   ARCGIS', 1)),
    ("sections", lambda t: plant(t, "#! <BREAKPOINTS>\n#! </BREAKPOINTS>\n", "")),
    ("identifiers", lambda t: plant(t, '#!   IDENTIFIER="8"', '#!   IDENTIFIER="7"')),
    ("links", lambda t: plant(t, '#!   TARGET_NODE="7"', '#!   TARGET_NODE="99"')),
    ("links", lambda t: plant(t, 'SOURCE_PORT_DESC="fo 1 &lt;lt&gt;Rejected&lt;gt&gt;"',
                              'SOURCE_PORT_DESC="fo 1 REJECTED"')),
    ("links", lambda t: plant(t, 'TARGET_PORT_DESC="fi 0 "', 'TARGET_PORT_DESC="in 0"')),
    ("build", lambda t: plant(t, 'FME_BUILD_NUM="25241"', 'FME_BUILD_NUM="25835"')),
    ("build", lambda t: plant(t, 'LAST_SAVE_BUILD "FME 2025.0.3.0',
                              'LAST_SAVE_BUILD "FME 2025.0.2.0')),
    ("python", lambda t: plant(t, "FME_PYTHON_VERSION 39", "FME_PYTHON_VERSION 313")),
    ("script", lambda t: plant(t, "<u00e5>", "<aring>")),
    ("script", lambda t: plant(plant(t, "class<space>FeatureProcessor",
                                     "class<space>Feature<space>Processor"),
                               "class&lt;space&gt;FeatureProcessor",
                               "class&lt;space&gt;Feature&lt;space&gt;Processor")),
    ("script", lambda t: plant(t, " }    PY_OUTPUT_TAGS", "<lf> }    PY_OUTPUT_TAGS")),
    ("script", lambda t: plant(t, "FACTORY_NAME { PythonCaller }", "FACTORY_NAME { Other }")),
    ("script", lambda t: plant(plant(t, "Kr<u00e5>ka", "Kr\u00e5ka"), "Kr&lt;u00e5&gt;ka",
                               "Kr\u00e5ka")),
    ("rejected", lambda t: unlink_rejected(plant(t, 'TERMINATE_REJECTED="NO"',
                                                 'TERMINATE_REJECTED="YES"'))),
    ("parameters", lambda t: plant(t, "DEFAULT_MACRO FAIR_INTAKE_ENGINES 8",
                                   "DEFAULT_MACRO FAIR_INTAKE_ENGINES 9")),
    ("parameters", lambda t: plant(t, "DEFAULT_MACRO FAIR_DB \n", "")),
    ("parameters", lambda t: plant(t, '<INFO NAME="FAIR_DB"', '<INFO NAME="FAIR_XX"')),
    ("parameters", lambda t: re.sub(r'FORM="[^"]*"', 'FORM="bm90IGpzb24="', t)),
]


@pytest.mark.parametrize("rule, damage", PLANTED,
                         ids=[f"{rule}-{i}" for i, (rule, _) in enumerate(PLANTED)])
def test_each_planted_defect_is_reported_by_its_rule(rule, damage):
    """Every rule fires on the defect planted for it (none passes vacuously)."""
    found = rules(check_workspace(damage(generated())))
    assert rule in found, found
    assert rule in RULES


def test_rejected_unconnected_is_fine_when_rejected_features_continue():
    """An unconnected <Rejected> under TERMINATE_REJECTED="NO" gets a Nuker, not an @Abort."""
    text = unlink_rejected(generated())
    assert rules(check_workspace(text)) == []
    assert rules(check_workspace(text.replace('TERMINATE_REJECTED="NO"',
                                              'TERMINATE_REJECTED="YES"'))) == ["rejected"]


def test_expected_script_must_match_exactly():
    """A script that differs by one character from the expected one is reported."""
    problems = check_workspace(generated(), expected_script=SCRIPT.replace("Kråka", "Kraka"))
    assert rules(problems) == ["expected-script"]
    assert "character" in problems[0].message


def test_expected_parameters_compare_names_order_and_defaults():
    """Another name, another order or another default than expected is reported."""
    text = generated()
    for wanted in ({"FAIR_DB": ""}, {"FAIR_INTAKE_ENGINES": "8", "FAIR_DB": ""},
                   {"FAIR_DB": "", "FAIR_INTAKE_ENGINES": "10"}):
        assert rules(check_workspace(text, expected_parameters=wanted)) == [
            "expected-parameters"]


def test_a_secret_typed_into_a_file_is_never_quoted():
    """A ledger password typed in as FAIR_DB's default is reported without being repeated."""
    secret = "postgresql://fair:hunter2-pw@db.example/ledger"
    form = base64.b64encode(base64.b64decode(
        re.search(r'FORM="([^"]*)"', generated()).group(1)).replace(
        b'"defaultValue":""', f'"defaultValue":"{secret}"'.encode(), 1)).decode()
    text = re.sub(r'FORM="[^"]*"', f'FORM="{form}"', generated())
    text = text.replace("DEFAULT_MACRO FAIR_DB \n", f"DEFAULT_MACRO FAIR_DB {secret}\n")
    problems = check_workspace(text, expected_parameters={"FAIR_DB": "",
                                                          "FAIR_INTAKE_ENGINES": "8"})
    assert rules(problems) == ["expected-parameters", "parameters"]
    assert all("hunter2" not in str(p) for p in problems)


def test_entity_declarations_are_refused_before_parsing():
    """A header with a DOCTYPE (which FME never writes) is not handed to the XML parser."""
    text = plant(generated(), "#! <DATASETS>\n", '#! <DATASETS>\n#! <!ENTITY a "b">\n')
    (problem,) = check_workspace(text)
    assert problem.rule == "header" and "ENTITY" in problem.message


def test_problems_read_as_one_line_each():
    """A problem prints as 'rule: message', on one line."""
    problem = Problem("links", "link 4 ends at 99")
    assert str(problem) == "links: link 4 ends at 99"
    broken = generated().replace('FME_BUILD_NUM="25241"', 'FME_BUILD_NUM="1"')
    for p in check_workspace(broken):
        assert "\n" not in str(p)


def test_checker_takes_text_only():
    """Bytes are refused with a ConfigurationError: decode the file first."""
    with pytest.raises(ConfigurationError):
        check_workspace(generated().encode("utf-8"))


_LINES = generated().split("\n")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_LINES) - 1), st.sampled_from(
    ["", "#! ", "#! <X>", "#!   IDENTIFIER=\"2\"", "#! </TRANSFORMER>", "garbage", "#! <FORM",
     "FACTORY_DEF {*} PythonFactory    FACTORY_NAME { PythonCaller }    SOURCE_CODE { <x> }",
     "DEFAULT_MACRO", "#! <USER_PARAMETERS FORM=\"!!\">"])), max_size=4))
def test_a_damaged_file_gives_problems_never_an_exception(edits):
    """Whatever lines are replaced, the checker answers with problems and does not raise."""
    lines = list(_LINES)
    for index, replacement in edits:
        lines[index] = replacement
    problems = check_workspace("\n".join(lines))
    assert all(isinstance(p, Problem) and p.rule in RULES for p in problems)
