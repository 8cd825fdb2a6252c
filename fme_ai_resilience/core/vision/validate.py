"""Is an AI assessment fit to be written back? Schema, value domain and the confidence policy.

Three checks, in order, on an assessment given as a mapping (``{"condition", "confidence",
"labels", "model_version", "provider"}``) or any object with a ``to_dict()`` returning one:

1. the JSON Schema (:data:`ASSESSMENT_SCHEMA`): required fields, their types;
2. the value domain: ``condition`` is one of the configured conditions (ignoring case and
   surrounding whitespace: ``"Damaged "`` is ``damaged``; unknown words are not guessed at),
   ``confidence`` (and each label's confidence) is a finite number in [0, 1];
3. the confidence policy, against the threshold for the asset type (default 0.75): at or above
   it the conclusion is ACCEPTED. Below it the policy is asymmetric, because a missed defect
   costs more than an extra look: an *alarm* conclusion (``damaged`` by default) is never
   dropped or downgraded, it goes to REVIEW flagged as possible damage; a reassuring one
   (``good``, ``fair``) is simply not trusted and goes to REVIEW for lack of confidence. Only
   a conclusion that reaches the threshold is written back as fact. The label-based adapters
   keep to the same asymmetry: a weak sign of something more alarming caps the confidence of
   any less alarming conclusion (``ConditionRules``), which then goes to REVIEW.

Failing 1 or 2 gives an INVALID verdict, from which :meth:`Verdict.anomaly` builds the
:class:`~fme_ai_resilience.core.ledger.FormatAnomaly` the caller stores. Pure: no I/O, no clock
(the caller passes ``observed_at``). :func:`schema_errors` is how every JSON Schema violation in
the library is reported (the provider adapters use it too).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..checks import finite_number
from ..config.fields import check_field, is_number, name_fields, ratio_fields
from ..errors import ConfigurationError
from ..ledger import FormatAnomaly
from ..text.untrusted_json import deeper_than

__all__ = ["ValidationSettings", "ASSESSMENT_SCHEMA", "DEFAULT_ALARM_CONDITIONS", "VerdictKind", "Verdict",
           "schema_errors", "canonical_condition", "domain_errors", "validate",
           "SCHEMA_MAX_DEPTH", "SCHEMA_MESSAGE_LIMIT"]


@dataclass(frozen=True)
class ValidationSettings:
    """Confidence policy for AI conclusions (docs/vision.md).

    ``thresholds`` overrides ``confidence_threshold`` per asset type
    (``"hydrant=0.8,valve=0.9"`` as a string).
    """

    confidence_threshold: float = 0.75
    thresholds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    conditions: Tuple[str, ...] = ("good", "fair", "damaged")

    def __post_init__(self) -> None:
        ratio_fields("validation", self, "confidence_threshold")
        check_field("validation", "thresholds", self.thresholds,
               isinstance(self.thresholds, Mapping), "must map asset types to numbers")
        for asset, value in self.thresholds.items():
            check_field("validation", f"thresholds[{asset}]", value,
                   is_number(value) and 0.0 <= value <= 1.0,
                   "must be between 0 and 1")
        object.__setattr__(self, "thresholds", MappingProxyType(dict(self.thresholds)))
        name_fields("validation", self, "conditions")
        check_field("validation", "conditions", self.conditions, len(self.conditions) > 0,
               "needs at least one condition")

    def threshold_for(self, asset_type: Optional[str]) -> float:
        """The confidence an assessment of ``asset_type`` must reach."""
        return self.thresholds.get(asset_type or "", self.confidence_threshold)

#: The shape every provider adapter produces (``Assessment.to_dict()``).
ASSESSMENT_SCHEMA: Mapping[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["condition", "confidence"],
    "properties": {
        "condition": {"type": "string", "minLength": 1},
        "confidence": {"type": "number"},
        "labels": {
            "type": "array",
            "items": {"type": "array", "minItems": 2, "maxItems": 2,
                      "prefixItems": [{"type": "string"}, {"type": "number"}]},
        },
        "model_version": {"type": ["string", "null"]},
        "provider": {"type": "string"},
    },
}

DEFAULT_ALARM_CONDITIONS = ("damaged",)


class VerdictKind(str, enum.Enum):
    """What happens to an assessment."""

    ACCEPTED = "ACCEPTED"   # written back as the conclusion
    REVIEW = "REVIEW"       # written back, flagged for a person
    INVALID = "INVALID"     # not usable: a format anomaly (drift, out-of-domain values)


@dataclass(frozen=True)
class Verdict:
    """What happens to one assessment (``kind``) and why (``reasons``, human-readable)."""

    kind: VerdictKind
    reasons: tuple = ()
    threshold: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", VerdictKind(self.kind))
        object.__setattr__(self, "reasons", tuple(str(r) for r in self.reasons))
        if self.kind is VerdictKind.INVALID and not self.reasons:
            raise ConfigurationError("reasons", self.reasons, "an INVALID verdict must say why")

    @property
    def accepted(self) -> bool:
        return self.kind is VerdictKind.ACCEPTED

    @property
    def invalid(self) -> bool:
        return self.kind is VerdictKind.INVALID

    def anomaly(self, *, provider: str, observed_at: float, excerpt: str = "",
                model_version: Optional[str] = None, task_key: Optional[str] = None,
                trace_id: str = "") -> Optional[FormatAnomaly]:
        """The ``format_anomaly`` record to store for an INVALID verdict, else None.

        ``excerpt`` must already be redacted (``redact.excerpt``); ``observed_at`` is epoch s.
        """
        if not self.invalid:
            return None
        return FormatAnomaly(provider=provider, observed_at=observed_at, errors=self.reasons,
                             excerpt=excerpt, model_version=model_version, task_key=task_key,
                             trace_id=trace_id)


def _as_mapping(result: Any) -> Any:
    to_dict = getattr(result, "to_dict", None)
    return to_dict() if callable(to_dict) else result


def _is_unit(value: Any) -> bool:
    return finite_number(value) and 0.0 <= value <= 1.0


#: Values nested deeper than this are not checked but refused (a hostile answer, not drift).
SCHEMA_MAX_DEPTH = 64
#: The longest message kept per violation (a message quotes the offending value).
SCHEMA_MESSAGE_LIMIT = 300


def schema_errors(value: Any, schema: Mapping[str, Any] = ASSESSMENT_SCHEMA) -> List[str]:
    """JSON Schema (2020-12) violations of ``value`` as ``"<path>: <message>"`` strings, sorted;
    empty when it conforms.

    Never raises for a hostile ``value``: one nested deeper than :data:`SCHEMA_MAX_DEPTH`
    levels, or one the validator cannot describe, is a single violation saying so. Each
    message is cut at :data:`SCHEMA_MESSAGE_LIMIT` characters.
    """
    # jsonschema costs ~45 ms to import: loaded on the first answer checked, never by the
    # settings (which hold ValidationSettings) that every command and PythonCaller loads.
    import jsonschema

    if deeper_than(value, SCHEMA_MAX_DEPTH):
        return [f"(root): nested deeper than {SCHEMA_MAX_DEPTH} levels"]
    validator = jsonschema.Draft202012Validator(schema)
    try:
        found = [(e.absolute_path, e.message) for e in validator.iter_errors(value)]
    except (RecursionError, ValueError, OverflowError) as exc:
        return [f"(root): cannot be checked ({type(exc).__name__})"]
    return sorted(f"{'/'.join(str(p) for p in path) or '(root)'}: "
                  f"{_cut(message, SCHEMA_MESSAGE_LIMIT)}" for path, message in found)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _folded(text: Any) -> Optional[str]:
    return text.strip().lower() if isinstance(text, str) else None


def canonical_condition(condition: Any, conditions: Iterable[str]) -> Optional[str]:
    """The configured condition ``condition`` names, ignoring case and surrounding spaces.

    ``"Damaged "`` and ``"DAMAGED"`` name ``damaged``; anything else (no synonyms are guessed)
    gives None.
    """
    folded = _folded(condition)
    if not folded:
        return None
    return next((c for c in conditions if _folded(c) == folded), None)


def domain_errors(result: Mapping[str, Any], conditions: Iterable[str]) -> Sequence[str]:
    """Value-domain violations: unknown condition, confidence not finite or outside [0, 1].

    A condition differing from a configured one only in case or surrounding whitespace is
    known (:func:`canonical_condition`).
    """
    allowed = tuple(conditions)
    out = []
    if canonical_condition(result.get("condition"), allowed) is None:
        out.append(f"condition: {result.get('condition')!r} is not one of {list(allowed)}")
    if not _is_unit(result.get("confidence")):
        out.append(f"confidence: {result.get('confidence')!r} is not a finite number in [0, 1]")
    for i, label in enumerate(result.get("labels") or ()):
        if not _is_unit(label[1]):
            out.append(f"labels/{i}: confidence {label[1]!r} is not a finite number in [0, 1]")
    return out


def validate(result: Any, settings: Optional[ValidationSettings] = None,
             asset_type: Optional[str] = None, *,
             alarm_conditions: Sequence[str] = DEFAULT_ALARM_CONDITIONS,
             schema: Mapping[str, Any] = ASSESSMENT_SCHEMA) -> Verdict:
    """The verdict on one assessment (a mapping or an object with ``to_dict()``).

    ``settings`` gives the allowed conditions, the default threshold and per-asset-type
    overrides; ``alarm_conditions`` are the conclusions that go to REVIEW (flagged as possible
    damage) rather than being trusted or dropped when below the threshold. Never raises for a
    bad ``result``: that is an INVALID verdict.
    """
    settings = settings or ValidationSettings()
    data = _as_mapping(result)
    errors = list(schema_errors(data, schema))
    if not errors:
        errors.extend(domain_errors(data, settings.conditions))
    if errors:
        return Verdict(VerdictKind.INVALID, errors)
    threshold = settings.threshold_for(asset_type)
    condition = canonical_condition(data["condition"], settings.conditions)
    confidence = float(data["confidence"])
    if confidence >= threshold:
        return Verdict(VerdictKind.ACCEPTED,
                       (f"{condition} at confidence {confidence:.2f} >= {threshold:.2f}",),
                       threshold)
    if canonical_condition(condition, alarm_conditions) is not None:
        reason = (f"possible {condition}: confidence {confidence:.2f} below {threshold:.2f}; "
                  "a person must confirm")
    else:
        reason = (f"{condition} not trusted: confidence {confidence:.2f} below "
                  f"{threshold:.2f}")
    return Verdict(VerdictKind.REVIEW, (reason,), threshold)
