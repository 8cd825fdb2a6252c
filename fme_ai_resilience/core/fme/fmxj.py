"""The native transformers' definitions (``.fmxj``), written as Safe writes its own.

Every key is one Safe's own transformer definitions use (HTTPCaller, the packaged-transformer
template; a test holds the forms to that set), and each parameter takes the form Safe gives
its kind:

* a URL: a text field with the URL editor (``editor: url``, ``urlSettings``) whose value is
  ``stringEncoded``, as HTTPCaller's Request URL;
* a JSON document (the webhook body and headers): plain-text editor, ``stringEncoded``, as
  HTTPCaller's Upload Body; a webhook body is no password: it is read from an attribute;
* a secret: a password field (``stringEncoded`` when it is JSON);
* a number: ``type: number`` with its bounds (``minimum``, ``maximum``; ``multipleOf: 1``
  for counts), as HTTPCaller's timeouts;
* a choice (an enumerated setting, a yes/no): a dropdown of its values;
* the FME web connection: a dropdown of the ``webConnections`` choice set, as HTTPCaller's
  Web Connection;
* anything else: a text field.

Every parameter but the ledger URL is optional and blank by default: blank keeps the
library's default (or the ``resilience_config`` row), as the prompt says. The template passes
the parameters to the Python class as ``___XF_*`` attributes and routes what carries
``fme_rejection_code`` to ``<Rejected>`` (no output tags: FME 2023 runs it).
"""
from __future__ import annotations

import enum
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ..config.pipeline_settings import PROVIDER_NAMES, SINKS
from ..config.settings import Settings
from .fpkg import PARAMETER_PREFIX, Transformer, fq_name
from .parameters import BODY_PARAMETER, HEADERS_PARAMETER, PublishedParameter, parameters_for

__all__ = ["fmxj", "form_parameter", "form_kind", "URL_SETTINGS", "JSON_PARAMETERS",
           "RATIOS", "CHOICES"]

#: Settings whose value is a URL.
URL_SETTINGS = frozenset({"vision.endpoint", "vision.fallback_endpoint", "arcgis.portal_url",
                          "writeback.layer_url", "writeback.table_url"})
#: Parameters whose value is a JSON document.
JSON_PARAMETERS = frozenset({BODY_PARAMETER, HEADERS_PARAMETER, "FAIR_DOWNLOAD_HOST_HEADERS"})
#: Settings that are a share, 0 to 1.
RATIOS = frozenset({"validation.confidence_threshold", "breaker.failure_rate",
                    "alerts.anomaly_rate", "alerts.dead_letter_ratio"})
#: Settings chosen from a list that is not an enum of the settings.
CHOICES: Mapping[str, Tuple[str, ...]] = {"vision.provider": PROVIDER_NAMES,
                                          "writeback.sink": SINKS}
_WEB_CONNECTION = "arcgis.web_connection"
_SUPPORTED = ["expression", "globalParameter"]
_DEFAULTS = Settings()


def _typed(setting: str) -> Any:
    """The library's default of ``setting`` as a typed value (an enum, a bool, a number)."""
    if "." not in setting:
        return None
    group, field = setting.split(".", 1)
    return getattr(getattr(_DEFAULTS, group, None), field, None)


def form_kind(p: PublishedParameter) -> str:
    """The kind of form field ``p`` gets: ``password``, ``json``, ``url``, ``number``,
    ``integer``, ``choice``, ``yesno``, ``web_connection`` or ``text``."""
    setting = p.setting or ""
    if p.name in (BODY_PARAMETER, HEADERS_PARAMETER):
        return "json"   # a document read from an attribute, not a secret someone types
    if p.secret:
        return "password"
    if setting == _WEB_CONNECTION:
        return "web_connection"
    if setting in URL_SETTINGS:
        return "url"
    value = _typed(setting)
    if setting in CHOICES or isinstance(value, enum.Enum):
        return "choice"
    if isinstance(value, bool):
        return "yesno"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "text"


def _choices(p: PublishedParameter) -> List[Dict[str, str]]:
    setting = p.setting or ""
    if form_kind(p) == "yesno":
        return [{"display": "Yes", "value": "true"}, {"display": "No", "value": "false"}]
    value = _typed(setting)
    values = CHOICES.get(setting) or tuple(m.value for m in type(value))
    return [{"display": v, "value": v} for v in values]


def form_parameter(p: PublishedParameter) -> Dict[str, Any]:
    """The form entry of one published parameter, as ``___XF_<NAME>``, keys in the order
    Safe's own definitions write them."""
    kind = form_kind(p)
    entry: Dict[str, Any] = {"name": PARAMETER_PREFIX + p.name, "prompt": p.prompt,
                             "valueType": "stringEncoded" if kind in (
                                 "json", "url", "web_connection") else "string"}
    if p.name in JSON_PARAMETERS:
        entry["valueType"] = "stringEncoded"
    if not p.required:
        entry["required"] = False
    entry["defaultValue"] = p.default
    entry["supportedValueTypes"] = list(_SUPPORTED)
    if kind == "password":
        entry["type"] = "password"
    elif kind in ("choice", "yesno"):
        entry.update({"choiceSettings": {"choiceSet": "userDefined", "sort": "noSort",
                                         "choices": _choices(p)}, "type": "dropdown"})
    elif kind == "web_connection":
        entry.update({"choiceSettings": {"choiceSet": "webConnections"}, "type": "dropdown"})
    elif kind in ("number", "integer"):
        entry.update({"type": "number", "minimum": 0})
        if p.setting in RATIOS:
            entry["maximum"] = 1
        if kind == "integer":
            entry["multipleOf"] = 1
    elif kind == "url":
        entry.update({"type": "text", "editor": "url", "trimWhitespace": True,
                      "showEditButton": False,
                      "urlSettings": {"validSchemes": ["https", "http"]}})
    else:
        entry.update({"type": "text", "editor": "plaintext", "showEditButton": kind == "json"})
    return entry


def _attributes(names: Sequence[str]) -> List[Dict[str, str]]:
    return [{"name": name, "type": "buffer"} for name in names]


def _template(transformer: Transformer) -> List[str]:
    return [
        "# The parameters onto the input feature, as ___XF_ attributes.",
        "FACTORY_DEF {*} TeeFactory",
        "   FACTORY_NAME { $(XFORMER_NAME)_CATCHER }",
        "   $(INPUT_LINES)",
        "   OUTPUT { FEATURE_TYPE $(XFORMER_NAME)_READY",
        "      @RenameAttributes(FME_STRICT,___fme_rejection_code___,fme_rejection_code)",
        "      $(FME_PARM_VAL_LIST)",
        "   }",
        "",
        "# The library's class handles each feature.",
        "FACTORY_DEF {*} PythonFactory",
        "    FACTORY_NAME { $(XFORMER_NAME) }",
        "    INPUT { FEATURE_TYPE $(XFORMER_NAME)_READY }",
        f"    SYMBOL_NAME {transformer.symbol}",
        "    OUTPUT { PYOUTPUT FEATURE_TYPE $(XFORMER_NAME)_PROCESSED }",
        "",
        "# What carries fme_rejection_code leaves through <Rejected>, the rest through Output.",
        "FACTORY_DEF {*} TestFactory",
        "    FACTORY_NAME { $(XFORMER_NAME)_ROUTER }",
        "    INPUT { FEATURE_TYPE $(XFORMER_NAME)_PROCESSED }",
        '    TEST &fme_rejection_code == ""',
        "    OUTPUT { PASSED FEATURE_TYPE $(OUTPUT_Output_FTYPE)",
        "        @RenameAttributes(FME_STRICT,fme_rejection_code,___fme_rejection_code___)",
        "        @RemoveAttributes(fme_regexp_match,^___XF_.*$)",
        "        $(OUTPUT_Output_FUNCS) }",
        "    OUTPUT { FAILED FEATURE_TYPE $(OUTPUT_<Rejected>_FTYPE)",
        "        @RemoveAttributes(___fme_rejection_code___)",
        "        @RemoveAttributes(fme_regexp_match,^___XF_.*$)",
        "        $(OUTPUT_<Rejected>_FUNCS) }",
    ]


def fmxj(transformer: Transformer, attributes: Sequence[str]) -> Dict[str, Any]:
    """The ``.fmxj`` definition of ``transformer``: its parameter form (the workspace's
    published parameters, each in the form Safe gives its kind), the template that passes
    them to the Python class and routes ``fme_rejection_code`` to ``<Rejected>``, and its
    ports with every attribute the caller sets (``attributes``) in ``attributesAdded``."""
    name = fq_name(transformer)
    form = {"parameters": [
        {"name": "TRANSFORMER_GROUP", "prompt": "", "type": "group", "valueType": "string",
         "parameters": [{"name": "XFORMER_NAME", "prompt": "Transformer Name",
                         "type": "text", "valueType": "string", "defaultValue": name}]},
        {"name": "PARAMETERS_GROUP", "prompt": "Parameters", "type": "group",
         "valueType": "string", "required": False, "defaultValue": "<Unused>",
         "parameters": [form_parameter(p) for p in parameters_for(transformer.workspace)]},
    ]}
    return {
        "info": {"name": name, "categories": ["Integrations"]},
        "versions": [{
            "version": 1, "changeLog": ["Initial version"],
            "executionTemplate": _template(transformer), "featureHolding": "none",
            "form": form, "inputPorts": [{"name": ""}],
            "outputPorts": [
                {"name": "Output", "attributesAdded": _attributes(attributes)},
                {"name": "<Rejected>", "attributesAdded": _attributes(
                    [*attributes, "fme_rejection_code", "fme_rejection_message"])}],
            "upgradeWarning": "",
        }],
    }
