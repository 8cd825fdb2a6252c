"""The published parameters of the workspaces: one list, naming real settings, in agreement
with the templates' scripts and docs/configuration.md."""
from __future__ import annotations

import re

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.fme.parameters import (COMPENSATOR, DB_PARAMETER, INTAKE, PARAMETERS,
                                                   PROCESSOR, WORKSPACES, PublishedParameter,
                                                   changed_settings, parameter_name,
                                                   parameters_for)
from fme_ai_resilience.core.config.settings import SECRET_SETTINGS, Settings

from helpers import REPO


ROOT = REPO
DOC = ROOT / "docs" / "configuration.md"
#: | `FAIR_X` | `group.field` or (the ledger URL) | x | | x |
DOC_ROW = re.compile(r"^\| `(FAIR_[A-Z0-9_]+)` \| (.+?) \|(.*)\|$", re.M)
#: Settings that only go in pairs: one alone is refused naming the other.
PARTNERS = {"arcgis.client_id": "arcgis.client_secret", "arcgis.client_secret": "arcgis.client_id",
            "arcgis.username": "arcgis.password", "arcgis.password": "arcgis.username"}
#: What the table says in place of a setting for the parameters that are none.
NOT_SETTINGS = {"FAIR_DB": "(the ledger URL)", "FAIR_WEBHOOK_BODY": "(the webhook body)",
                "FAIR_WEBHOOK_HEADERS": "(the webhook headers)"}


def test_every_setting_parameter_names_a_real_setting():
    """Each entry with a setting names one that exists in Settings today."""
    known = Settings().as_flat_dict()
    unknown = [p.setting for p in PARAMETERS if p.setting is not None and p.setting not in known]
    assert unknown == []


def test_each_parameter_name_is_read_back_as_its_setting():
    """Settings.from_mapping reads FAIR_<GROUP>_<FIELD> as that very setting: the value "x"
    either lands in it (a list or a text) or is refused naming it (or, for a credential that
    goes with another, naming the one missing)."""
    for p in PARAMETERS:
        if p.setting is None:
            continue
        try:
            read = Settings.from_mapping({p.name: "x"}, prefix="FAIR_")
        except ConfigurationError as exc:
            assert exc.field in (p.setting, PARTNERS.get(p.setting)), p.name
        else:
            assert read.as_flat_dict(reveal_secrets=True)[p.setting] in (("x",), "x"), p.name


def test_blank_parameters_keep_every_default():
    """The files' blank values, passed as fme.macroValues would, change nothing."""
    values = {p.name: p.default for p in PARAMETERS}
    assert Settings.from_mapping(values, prefix="FAIR_") == Settings()


def test_the_ledger_parameter_is_required_secret_and_no_setting():
    """FAIR_DB is first in every workspace, required, secret, blank, and skipped by Settings
    (its group is no settings group), so FME's macroValues load without an error."""
    for workspace in WORKSPACES:
        first = parameters_for(workspace)[0]
        assert (first.name, first.setting, first.required, first.secret, first.default) == (
            DB_PARAMETER, None, True, True, "")
    assert Settings.from_mapping({"FAIR_DB": "postgresql://u:pw@h/db"}, prefix="FAIR_") \
        == Settings()


def test_settings_parameters_are_optional_and_blank():
    """Every settings parameter is optional and blank in the files: the library's default
    (shown in the prompt) applies until someone sets it; it is secret exactly when its
    setting is one of the secret settings."""
    for p in PARAMETERS:
        if p.setting is not None:
            assert (p.required, p.default, p.secret) == (
                False, "", p.setting in SECRET_SETTINGS), p.name
            assert "(blank: " in p.prompt and "(blank: )" not in p.prompt, p.name


def test_every_secret_setting_is_published_as_a_secret():
    """The Vision AI key and the ArcGIS credentials are parameters of WS-02 (and the ArcGIS
    ones of WS-03, which reconciles against the layer), all marked secret."""
    published = {p.setting: p for p in PARAMETERS if p.setting}
    for setting in SECRET_SETTINGS:
        assert published[setting].secret, setting
        assert PROCESSOR in published[setting].workspaces, setting
    assert {s for s in SECRET_SETTINGS if s.startswith("arcgis.")} <= {
        p.setting for p in parameters_for(COMPENSATOR)}


def test_the_processor_and_compensator_publish_what_they_need():
    """WS-02 publishes the Vision AI service, the ArcGIS credential and the write-back;
    WS-03 the compensator's budgets, the alerts, the cost of a call and the layer it
    reconciles against."""
    ws02 = {p.setting for p in parameters_for(PROCESSOR)}
    ws03 = {p.setting for p in parameters_for(COMPENSATOR)}
    flat = Settings().as_flat_dict()
    assert {"vision.provider", "vision.endpoint", "vision.key", "vision.model",
            "vision.fallback_endpoint", "arcgis.portal_url", "arcgis.web_connection",
            "writeback.sink", "writeback.layer_url", "writeback.table_url",
            "download.allow_private_hosts"} <= ws02
    assert {s for s in flat if s.startswith(("compensation.", "alerts."))} <= ws03
    assert {"cost.per_call", "writeback.layer_url", "vision.service",
            "vision.fallback_endpoint"} <= ws03


def test_intake_takes_the_webhook_from_two_optional_secret_parameters():
    """FAIR_WEBHOOK_BODY and FAIR_WEBHOOK_HEADERS are WS-01's, not settings, optional and
    secret (a body carries the submitter's portal token), and Settings skips them."""
    found = {p.name: p for p in parameters_for(INTAKE)}
    for name in ("FAIR_WEBHOOK_BODY", "FAIR_WEBHOOK_HEADERS"):
        p = found[name]
        assert (p.setting, p.required, p.secret, p.default, p.workspaces) == (
            None, False, True, "", (INTAKE,)), name
    assert Settings.from_mapping({"FAIR_WEBHOOK_BODY": '{"x": 1}'}, prefix="FAIR_") \
        == Settings()


def test_changed_secret_settings_travel_with_their_real_value():
    """flow deploy gives a schedule the key itself (the job hides it), never the
    "[REDACTED]" a displayed configuration shows."""
    settings = Settings().with_values({"vision.key": "sk-live-0123456789abcdef"})
    assert changed_settings(settings, PROCESSOR) == {"FAIR_VISION_KEY":
                                                     "sk-live-0123456789abcdef"}


def test_each_workspace_has_its_own_choice():
    """WS-01 has the intake settings, WS-02 the processing ones, WS-03 the compensator's."""
    groups = {w: {p.setting.split(".")[0] for p in parameters_for(w) if p.setting}
              for w in WORKSPACES}
    assert groups["WS-01_intake"] == {"intake"}
    assert {"processing", "retry", "timeouts", "validation", "download", "breaker"} \
        <= groups["WS-02_processor"]
    assert {"degrade", "alerts", "breaker"} <= groups["WS-03_compensator"]
    names = [p.name for p in PARAMETERS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("workspace", WORKSPACES)
def test_each_template_script_lists_its_parameters(workspace):
    """The docstring of workspaces/<name>.py names exactly that workspace's parameters, in
    the list's order, so the FME author reads what the .fmw publishes."""
    script = (ROOT / "workspaces" / f"{workspace}.py").read_text(encoding="utf-8")
    listing = script.split("Published parameters", 1)[1]
    named = re.findall(r"^\s+(FAIR_[A-Z0-9_]+)\s", listing, re.M)
    assert named == [p.name for p in parameters_for(workspace)]


def test_configuration_doc_lists_the_same_parameters():
    """docs/configuration.md's table has one row per parameter: its setting and the
    workspaces that publish it, as the list says."""
    rows = {m.group(1): (m.group(2).strip(), [c.strip() for c in m.group(3).split("|")])
            for m in DOC_ROW.finditer(DOC.read_text(encoding="utf-8"))}
    assert list(rows) == [p.name for p in PARAMETERS]
    for p in PARAMETERS:
        setting, marks = rows[p.name]
        assert setting == (f"`{p.setting}`" if p.setting else NOT_SETTINGS[p.name]), p.name
        assert [m == "x" for m in marks] == [w in p.workspaces for w in WORKSPACES], p.name


def test_parameter_name_follows_the_settings_naming():
    """``group.field`` is published as FAIR_GROUP_FIELD, the name Settings reads."""
    assert parameter_name("timeouts.ttfb_s") == "FAIR_TIMEOUTS_TTFB_S"
    assert parameter_name("alerts.e2e_p95_warning_ratio") == "FAIR_ALERTS_E2E_P95_WARNING_RATIO"


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "DB"}, "name"),
    ({"name": "FAIR_TIMEOUTS_TTFB", "setting": "timeouts.ttfb_s"}, "name"),
    ({"prompt": "a {tcl} $(x)"}, "prompt"),
    ({"default": "two\nlines"}, "default"),
    ({"secret": True, "default": "postgresql://u:pw@h/db"}, "default"),
    ({"workspaces": ("WS-09_other",)}, "workspaces"),
    ({"workspaces": ()}, "workspaces"),
])
def test_a_bad_parameter_is_refused(kwargs, field):
    """A malformed name, a prompt with Tcl specials, a multi-line default, a secret with a
    default or an unknown workspace raises ConfigurationError naming the field."""
    values = dict(name="FAIR_X", setting=None, prompt="X")
    values.update(kwargs)
    with pytest.raises(ConfigurationError) as info:
        PublishedParameter(**values)
    assert info.value.field == field
    assert "pw@" not in str(info.value)


def test_repr_never_shows_a_secret_default():
    """A secret parameter's repr shows no value (it has none in a file anyway)."""
    assert "[REDACTED]" in repr(parameters_for("WS-02_processor")[0])


def test_unknown_workspace_is_refused():
    """parameters_for names only the three templates."""
    with pytest.raises(ConfigurationError):
        parameters_for("WS-04_other")
