"""The classes the FME Package's native transformers run: the callers, with their settings
from the transformer's own parameters.

FME puts a transformer's parameters on each input feature as ``___XF_<NAME>`` attributes
(:data:`~fme_ai_resilience.core.fme.fpkg.PARAMETER_PREFIX`, the names of the workspace's published
parameters: ``___XF_FAIR_DB``), serialized: a text value comes FME-encoded (``/`` as
``<solidus>``). These classes take them off the feature and have FME parse each one through
the transformer's definition (``fmeobjects.FMETransformer``, FME 2023 build 23224 and later,
as Safe's fmetools does); an older FME decodes text values with
``FMESession.decodeFromFMEParsableText`` (a plain password is taken as given); outside FME
the values are taken as given. A password that still reads ``fme_decrypt(...)`` is then
decrypted by FME (:mod:`.decrypt`, in the callers). They are read over ``fme.macroValues``,
a blank one leaving the library's default (or the workspace's parameter of that name) in
force. Every feature leaves through the Python factory's one port: the
transformer's template sends those carrying ``fme_rejection_code`` to ``<Rejected>``.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Optional

from .caller_base import CallerBase
from .callers import CompensatorCaller, IntakeCaller, ProcessorCaller
from ..core.fme.fmxj import form_parameter
from ..core.fme.fpkg import PACKAGE_UID, PARAMETER_PREFIX, PUBLISHER_UID, TRANSFORMERS, fq_name
from ..core.fme.parameters import parameters_for

__all__ = ["IntakeTransformer", "ProcessorTransformer", "CompensatorTransformer",
           "transformer_parameters", "fme_parser"]

#: What FME gives for a parameter that has no value.
_NO_VALUE = frozenset({"", "FME_NULL_VALUE", "_FME_NO_OP_", "<Unused>"})
Parser = Callable[[str, str], Any]


def fme_parser(transformer: str, workspace: str) -> Optional[Parser]:
    """FME's reading of a serialized parameter value of ``transformer`` (its name in FME),
    ``(attribute name, value) -> value``: through ``fmeobjects.FMETransformer``, else text
    values through ``FMESession.decodeFromFMEParsableText``; None outside FME."""
    try:
        fmeobjects: Any = importlib.import_module("fmeobjects")
    except ImportError:
        return None
    make = getattr(fmeobjects, "FMETransformer", None)
    if make is not None:
        for package in (f"{PUBLISHER_UID}.{PACKAGE_UID}", ""):
            try:
                xformer = make(transformer, package, -1)  # -1: the latest version
            except Exception:  # noqa: BLE001 - FMEException: try the slower lookup
                continue

            def parse(name: str, value: str, xformer: Any = xformer) -> Any:
                xformer.setParameterValue(name, value)
                return xformer.getParsedParamValue(name)
            return parse
    session = getattr(fmeobjects, "FMESession", None)
    if session is None:
        return None
    forms = [form_parameter(p) for p in parameters_for(workspace)]
    passwords = {f["name"] for f in forms if (f["type"], f["valueType"]) == ("password",
                                                                              "string")}

    def decode(name: str, value: str) -> Any:
        return value if name in passwords else session().decodeFromFMEParsableText(value)
    return decode


def transformer_parameters(feature: Any, parse: Optional[Parser] = None) -> Dict[str, str]:
    """The ``___XF_*`` values of ``feature`` by parameter name, read by ``parse`` (see
    :func:`fme_parser`) and removed from the feature; blank ones are left out."""
    found: Dict[str, str] = {}
    for name in list(feature.getAllAttributeNames()):
        if not name.startswith(PARAMETER_PREFIX):
            continue
        value = feature.getAttribute(name)
        feature.removeAttribute(name)
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
            "" if value is None else str(value))
        if parse is not None and text not in _NO_VALUE:
            try:
                parsed = parse(name, text)
            except Exception:  # noqa: BLE001 - FME could not parse it: the value as given
                parsed = text
            if isinstance(parsed, float) and parsed.is_integer():
                parsed = int(parsed)   # a whole number field as FME's double: "10", not "10.0"
            text = "" if parsed is None else str(parsed)
        if text.strip() and text not in _NO_VALUE:
            found[name[len(PARAMETER_PREFIX):]] = text
    return found


class _Native(CallerBase):
    """What the three transformer classes share (see the module docstring)."""

    #: The transformer's name in FME (``fair.fme-ai-resilience.FairIntake``).
    transformer = ""

    def __init__(self) -> None:
        super().__init__()
        self._tags = False  # one Python port: the template routes <Rejected>
        self._parse: Optional[Parser] = None
        self._parser_made = False

    def _parameters(self, feature: Any) -> Dict[str, str]:
        if not self._parser_made:
            self._parse = fme_parser(self.transformer, self.workspace)
            self._parser_made = True
        return {**super()._parameters(feature), **transformer_parameters(feature, self._parse)}


_NAMES = {t.workspace: fq_name(t) for t in TRANSFORMERS}


class IntakeTransformer(_Native, IntakeCaller):
    """FairIntake: WS-01's caller with the transformer's parameters."""

    transformer = _NAMES[IntakeCaller.workspace]


class ProcessorTransformer(_Native, ProcessorCaller):
    """FairProcessor: WS-02's caller with the transformer's parameters."""

    transformer = _NAMES[ProcessorCaller.workspace]


class CompensatorTransformer(_Native, CompensatorCaller):
    """FairCompensator: WS-03's caller with the transformer's parameters."""

    transformer = _NAMES[CompensatorCaller.workspace]
