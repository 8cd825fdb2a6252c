"""The classes the FME Package's native transformers run: the callers, with their settings
from the transformer's own parameters.

FME puts a transformer's parameters on each input feature as ``___XF_<NAME>`` attributes
(:data:`~fme_ai_resilience.fme.fpkg.PARAMETER_PREFIX`, the names of the workspace's published
parameters: ``___XF_FAIR_DB``). These classes take them off the feature and read them over
``fme.macroValues``, a blank one leaving the library's default (or the workspace's parameter
of that name) in force. Every feature leaves through the Python factory's one port: the
transformer's template sends those carrying ``fme_rejection_code`` to ``<Rejected>``.
"""
from __future__ import annotations

from typing import Any, Dict

from .caller_base import CallerBase
from .callers import CompensatorCaller, IntakeCaller, ProcessorCaller
from .fpkg import PARAMETER_PREFIX

__all__ = ["IntakeTransformer", "ProcessorTransformer", "CompensatorTransformer",
           "transformer_parameters"]


def transformer_parameters(feature: Any) -> Dict[str, str]:
    """The ``___XF_*`` values of ``feature`` by parameter name, removed from the feature;
    blank ones are left out."""
    found: Dict[str, str] = {}
    for name in list(feature.getAllAttributeNames()):
        if not name.startswith(PARAMETER_PREFIX):
            continue
        value = feature.getAttribute(name)
        feature.removeAttribute(name)
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
            "" if value is None else str(value))
        if text.strip():
            found[name[len(PARAMETER_PREFIX):]] = text
    return found


class _Native(CallerBase):
    """What the three transformer classes share (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._tags = False  # one Python port: the template routes <Rejected>

    def _parameters(self, feature: Any) -> Dict[str, str]:
        return {**super()._parameters(feature), **transformer_parameters(feature)}


class IntakeTransformer(_Native, IntakeCaller):
    """FairIntake: WS-01's caller with the transformer's parameters."""


class ProcessorTransformer(_Native, ProcessorCaller):
    """FairProcessor: WS-02's caller with the transformer's parameters."""


class CompensatorTransformer(_Native, CompensatorCaller):
    """FairCompensator: WS-03's caller with the transformer's parameters."""
